package simcheck

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// Invariant names, as they appear in reports.
const (
	// InvStepOnce: every step body ran at least once and its step_completed
	// is recorded exactly once (checked for every step of a completed run,
	// and for every completed step of any run).
	InvStepOnce = "step-ran-and-completed-once"
	// InvTerminalLast: nothing follows a terminal run event in the log, and
	// the run ends once (one terminal event, one RunFinished).
	InvTerminalLast = "nothing-after-terminal"
	// InvCreatedComplete: every step_created step has a terminal step event.
	InvCreatedComplete = "created-steps-complete"
	// InvRunCompletes: the run completes — no continuation was lost.
	InvRunCompletes = "run-completes"
	// InvNoStall: the run took no longer than the visibility timeout, unless
	// faults were injected.
	InvNoStall = "no-stall"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

type checkLimits struct {
	stall  time.Duration
	faults bool
	t0     time.Duration
}

// stepKey is how the checker names step (stage, index), the same form as
// the engine's step entities in the log.
func stepKey(stage, index int) string { return fmt.Sprintf("%d.%d", stage, index) }

// check derives the invariants from the run's log (in position order) and
// what the observer saw.
func check(p engine.Program, events []world.Event, obs *observer, lim checkLimits) []Violation {
	var out []Violation
	add := func(inv, format string, args ...any) {
		out = append(out, Violation{inv, fmt.Sprintf(format, args...)})
	}

	created := map[string]int64{}
	terminal := map[string]int64{}
	completions := map[string]int{}
	var ends []world.Event
	var after []string
	for _, ev := range events {
		if len(ends) > 0 && !ev.Kind.RunTerminal() {
			after = append(after, fmt.Sprintf("%s %s@%d", ev.Kind, ev.Entity, ev.Pos))
		}
		switch {
		case ev.Kind.RunTerminal():
			ends = append(ends, ev)
		case ev.Kind == world.StepCreated:
			created[ev.Entity] = ev.Pos
		case ev.Kind.StepTerminal():
			terminal[ev.Entity] = ev.Pos
			if ev.Kind == world.StepCompleted {
				completions[ev.Entity]++
			}
		}
	}

	if len(after) > 0 {
		add(InvTerminalLast, "%s@%d is followed by %s", ends[0].Kind, ends[0].Pos, strings.Join(after, ", "))
	}
	if len(ends) > 1 {
		add(InvTerminalLast, "%d terminal run events", len(ends))
	}
	if obs.ends > 1 {
		add(InvTerminalLast, "the engine reported the run's end %d times", obs.ends)
	}

	completed := len(ends) > 0 && ends[0].Kind == world.RunCompleted
	if !completed || !obs.finished {
		add(InvRunCompletes, "run not completed (%s); %s", endState(ends, obs), progress(p, created, terminal))
	}

	var missing []string
	for id := range created {
		if _, ok := terminal[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s@%d", id, created[id]))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		add(InvCreatedComplete, "%d created step(s) never completed: %s", len(missing), clip(missing, 8))
	}

	var bad []string
	for id, n := range completions {
		if n != 1 {
			bad = append(bad, fmt.Sprintf("%s completed %d times", id, n))
		}
		if obs.bodies[id] == 0 {
			bad = append(bad, fmt.Sprintf("%s completed without its body running", id))
		}
	}
	if completed {
		for s, st := range p.Stages {
			n := 0
			switch st.Kind {
			case engine.StageSteps:
				n = st.Steps
			case engine.StageStream:
				n = 2
			}
			for i := 0; i < n; i++ {
				id := stepKey(s, i)
				if obs.bodies[id] == 0 {
					bad = append(bad, id+" never ran")
				} else if completions[id] == 0 {
					bad = append(bad, id+" has no step_completed")
				}
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		add(InvStepOnce, "%s", clip(bad, 8))
	}

	if obs.finished && !lim.faults && obs.at-lim.t0 > lim.stall {
		add(InvNoStall, "run took %v, beyond the visibility timeout %v with no fault injected", obs.at-lim.t0, lim.stall)
	}
	return out
}

func endState(ends []world.Event, obs *observer) string {
	switch {
	case len(ends) == 0 && !obs.finished:
		return "no terminal event, no RunFinished"
	case len(ends) == 0:
		return "RunFinished without a terminal event"
	case !obs.finished:
		return ends[0].Kind.String() + " without RunFinished"
	}
	return ends[0].Kind.String()
}

// progress summarizes each stage's created and completed steps.
func progress(p engine.Program, created, terminal map[string]int64) string {
	var parts []string
	for s, st := range p.Stages {
		n := st.Steps
		if st.Kind == engine.StageStream {
			n = 2
		}
		c, d := 0, 0
		for i := 0; i < n; i++ {
			if _, ok := created[stepKey(s, i)]; ok {
				c++
			}
			if _, ok := terminal[stepKey(s, i)]; ok {
				d++
			}
		}
		parts = append(parts, fmt.Sprintf("stage %d: %d/%d created, %d/%d done", s, c, n, d, n))
		if d < n {
			break
		}
	}
	return strings.Join(parts, "; ")
}

func clip(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", … (%d more)", len(items)-n)
}
