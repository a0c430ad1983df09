package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

// runState is what a replay derives from a run's log.
type runState struct {
	started, terminal bool
	lastPos           int64
	// current is the first stage that is not complete (len(stages) when all are).
	current int
	// created and done count the current stage's step entities; createdSet
	// marks which of its steps exist.
	created, done int
	createdSet    []bool
	hookCreated   bool
	hookReceived  bool
	// race is, once every stage is complete, the first race stage whose
	// losers have not all finished (-1: none): the run may not end yet.
	race int
}

// derive replays events against the program. It walks the log once per call:
// the replay cost grows with the log's length, as in real engines.
func derive(events []world.Event, p *Program, upTo int64) runState {
	var st runState
	n := len(p.Stages)
	// Stage progress in one pass: per stage, created and done step counts
	// and hook flags. Small programs use a stack array.
	var buf [8]stageCount
	var counts []stageCount
	if n <= len(buf) {
		counts = buf[:n]
	} else {
		counts = make([]stageCount, n)
	}
	for i := range events {
		ev := &events[i]
		if upTo > 0 && ev.Pos > upTo {
			continue
		}
		if ev.Pos > st.lastPos {
			st.lastPos = ev.Pos
		}
		switch ev.Kind {
		case world.RunStarted:
			st.started = true
		case world.RunCompleted, world.RunFailed:
			st.terminal = true
		case world.StepCreated, world.StepCompleted, world.StepFailed:
			stage, _, ok := parseStepID(ev.Entity)
			if !ok || stage >= n {
				continue
			}
			if ev.Kind == world.StepCreated {
				counts[stage].created++
			} else {
				counts[stage].done++
			}
		case world.HookCreated, world.HookReceived:
			stage, ok := hookStage(ev.Entity)
			if !ok || stage >= n {
				continue
			}
			if ev.Kind == world.HookCreated {
				counts[stage].hookCreated = true
			} else {
				counts[stage].hookReceived = true
			}
		}
	}
	st.current, st.race = n, -1
	for s := 0; s < n; s++ {
		if !counts[s].complete(p.Stages[s]) {
			st.current = s
			st.created, st.done = counts[s].created, counts[s].done
			st.hookCreated, st.hookReceived = counts[s].hookCreated, counts[s].hookReceived
			break
		}
	}
	open := st.current // the stage whose steps the replay may (re)dispatch
	if st.current == n {
		for s := 0; s < n; s++ {
			if p.Stages[s].Race && counts[s].done < p.Stages[s].Steps {
				st.race, open = s, s
				st.created, st.done = counts[s].created, counts[s].done
				break
			}
		}
	}
	// Which steps of that stage exist: only needed when some but not all
	// were created (a dispatch that stopped half way).
	if open < n && st.created > 0 && st.created < stageSteps(p.Stages[open]) {
		st.createdSet = make([]bool, stageSteps(p.Stages[open]))
		for i := range events {
			ev := &events[i]
			if ev.Kind != world.StepCreated || (upTo > 0 && ev.Pos > upTo) {
				continue
			}
			if stage, idx, ok := parseStepID(ev.Entity); ok && stage == open && idx < len(st.createdSet) {
				st.createdSet[idx] = true
			}
		}
	}
	return st
}

// stageDone counts the completed steps of stage s in events up to position
// upTo (0: all).
func stageDone(events []world.Event, s int, upTo int64) int {
	n := 0
	for i := range events {
		ev := &events[i]
		if !ev.Kind.StepTerminal() || (upTo > 0 && ev.Pos > upTo) {
			continue
		}
		if stage, _, ok := parseStepID(ev.Entity); ok && stage == s {
			n++
		}
	}
	return n
}

type stageCount struct {
	created, done             int
	hookCreated, hookReceived bool
}

func (c stageCount) complete(s Stage) bool {
	switch {
	case s.Kind == StageHook:
		return c.hookReceived
	case s.Race:
		return c.done >= 1
	}
	return c.done >= stageSteps(s)
}

// stageSteps is the number of step entities a stage creates.
func stageSteps(s Stage) int {
	switch s.Kind {
	case StageSteps:
		return s.Steps
	case StageStream:
		if s.Stream != nil && s.Stream.Transform {
			return 3 // writer, reader and transform
		}
		return 2 // writer and reader
	}
	return 0
}

// hookStage parses the stage out of a hook token "<run>/h<stage>".
func hookStage(token string) (int, bool) {
	for i := len(token) - 1; i > 0; i-- {
		if token[i] == 'h' && token[i-1] == '/' {
			return atoi(token[i+1:])
		}
	}
	return 0, false
}

// invocation is one orchestrator activation: a queue delivery of a workflow
// message, or a last completer continuing the run in its own task.
type invocation struct {
	run  string
	prog *programInfo
	// prevStep is true once a step body ran in this task: the next inline
	// step follows it with no queue hop.
	prevStep bool
	// inlined counts inline steps this invocation ran (InlineBudget).
	inlined int
	// inlineUntil is the runtime time after which this invocation starts no
	// more inline steps (0: no limit); see Engine.newInvocation.
	inlineUntil time.Duration
	// ensure is an event the replay must find in the log, or write before it
	// derives anything (a lazily resumed hook's hook_received).
	ensure *world.Event
}

// newInvocation starts an orchestrator activation of run in a task that
// holds a queue delivery. Inline steps run in that task while its message is
// invisible to other consumers; past the visibility timeout the queue hands
// the message to another consumer, and when the first task acks it the
// second task's failure has nothing left to retry — the run is lost. So an
// invocation starts inline steps only during the first half of the world's
// visibility timeout (the reference's engine stops inlining at a deadline
// margin too); after that the next step goes through the queue and the task
// acks.
func (e *Engine) newInvocation(run string, prog *programInfo) *invocation {
	inv := &invocation{run: run, prog: prog}
	if e.inlineWindow > 0 {
		inv.inlineUntil = e.rt.Now() + e.inlineWindow
	}
	return inv
}

// mayInline reports whether the invocation may start another inline step.
func (e *Engine) mayInline(inv *invocation) bool {
	if e.f.InlineBudget > 0 && inv.inlined >= e.f.InlineBudget {
		return false
	}
	return inv.inlineUntil == 0 || e.rt.Now() < inv.inlineUntil
}

// maxPreconditionRetries bounds the reloads after a guarded write was rejected.
const maxPreconditionRetries = 32

// replay loads the run's log, derives where it stands and drives it forward:
// start it, dispatch the next stage's steps (running some inline), create a
// hook, or complete the run. It returns when the run waits on steps or a
// hook, or is terminal.
func (e *Engine) replay(ctx context.Context, inv *invocation) error {
	prog := inv.prog
	rejected := 0
	for {
		events, err := e.w.Load(ctx, inv.run)
		if err != nil {
			return fmt.Errorf("load %s: %w", inv.run, err)
		}
		if ev := inv.ensure; ev != nil {
			inv.ensure = nil
			if !hasEvent(events, ev.ID) {
				if _, err := e.w.Append(ctx, inv.run, *ev, world.Precondition{}); err != nil &&
					!errors.Is(err, world.ErrConflict) && !errors.Is(err, world.ErrGone) {
					return fmt.Errorf("replay %s: re-ensure %s: %w", inv.run, ev.Kind, err)
				}
				continue // reload with the event in place
			}
		}
		st := derive(events, prog.Program, 0)
		if st.terminal {
			e.gone(inv.run)
			return nil
		}
		err = e.advance(ctx, inv, &st, events)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errContinue):
			continue // an inline step finished its stage: replay again
		case errors.Is(err, world.ErrPrecondition):
			if rejected++; rejected > maxPreconditionRetries {
				return fmt.Errorf("replay %s: %d guarded writes rejected: %w", inv.run, rejected, err)
			}
			continue // the log moved under us: reload and derive again
		case errors.Is(err, world.ErrGone):
			e.gone(inv.run)
			return nil // the run ended meanwhile
		default:
			return err
		}
	}
}

// hasEvent reports whether the log holds an event with that ID.
func hasEvent(events []world.Event, id string) bool {
	for i := range events {
		if events[i].ID == id {
			return true
		}
	}
	return false
}

// errContinue asks replay to reload and go on (an inline step completed its stage).
var errContinue = errors.New("continue replay")

// advance does one replay step from state st.
func (e *Engine) advance(ctx context.Context, inv *invocation, st *runState, events []world.Event) error {
	guard := world.Precondition{Guarded: true, LastPos: st.lastPos}
	if !st.started {
		res, err := e.w.Append(ctx, inv.run, world.Event{Kind: world.RunStarted, ID: idRunStarted}, guard)
		if err != nil {
			return fmt.Errorf("run_started %s: %w", inv.run, err)
		}
		st.lastPos = res.Pos
		guard.LastPos = res.Pos
	}
	if st.current == len(inv.prog.Stages) && st.race >= 0 {
		// Every stage is complete but a race's losers are still running:
		// the run ends when the last of them completes (its completer
		// continues the run). Hand any of them a dispatch that stopped half
		// way never finished to the queue, so none is left behind.
		st.current = st.race
		return e.dispatchStage(ctx, inv, st, guard, events)
	}
	if st.current == len(inv.prog.Stages) {
		res, err := e.w.Append(ctx, inv.run, world.Event{Kind: world.RunCompleted, ID: idRunCompleted}, guard)
		if err != nil {
			if world.IsTransient(err) {
				e.unconfirmed.Store(inv.run, false)
			}
			return fmt.Errorf("run_completed %s: %w", inv.run, err)
		}
		// A duplicate is an earlier write's: reported by whoever wrote it,
		// or here when that was this engine and its answer was lost.
		if _, was := e.unconfirmed.LoadAndDelete(inv.run); !res.Duplicate || was {
			e.finish(inv.run, false)
		}
		return nil
	}
	stage := inv.prog.Stages[st.current]
	if stage.Kind == StageHook {
		if st.hookCreated {
			return nil // waiting for the resume
		}
		token := hookToken(inv.run, st.current)
		res, err := e.w.Append(ctx, inv.run, world.Event{Kind: world.HookCreated, ID: "hc/" + token, Entity: token}, guard)
		if err != nil {
			return fmt.Errorf("hook_created %s: %w", token, err)
		}
		if !res.Duplicate {
			e.obs.HookCreated(inv.run, token, e.rt.Now())
		}
		return nil
	}
	return e.dispatchStage(ctx, inv, st, guard, events)
}

// finish reports a run's end and forgets its cached program.
func (e *Engine) finish(run string, failed bool) {
	e.programs.Delete(run)
	if at, now := e.end.finish(run, failed); now {
		e.spans.finished(run)
		e.obs.RunFinished(run, at, failed)
		e.spans.forget(run)
	}
}
