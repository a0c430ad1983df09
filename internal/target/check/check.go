package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durabench/durabench/internal/target"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/clockoffset"
	"github.com/durabench/durabench/scenarios"
)

// Options tune Check.
type Options struct {
	// Runs per scenario (default 3).
	Runs int
	// RunTimeout bounds one run, from its start to its terminal timeline
	// (default 30 s).
	RunTimeout time.Duration
	// Slack is added to the clock's error bound (RTT/2) when checking that
	// timestamps fall inside a run's request window (default 2 ms).
	Slack time.Duration
	// MaxClockBound is the largest clock error bound (RTT/2) and clock
	// drift the checker accepts (default 1 ms).
	MaxClockBound time.Duration
	// HoldWait is the wait of the long poll the checker sends while a
	// hook waits for its resume: it must not come back empty much sooner
	// (default 300 ms).
	HoldWait time.Duration
}

// OptionsFor are the small option values the checker runs each
// scenario with (a target must support at least these).
var OptionsFor = map[string]map[string]string{
	"fanout":          {"branches": "8"},
	"sequential":      {"steps": "5"},
	"race":            {"branches": "4"},
	"payload":         {"steps": "3"},
	"stream-replay":   {"speed": "8"},
	"stream-sizes":    {"chunks": "12"},
	"stream-pipeline": {"chunks": "12"},
}

// Result is one check of one scenario (or of the whole target:
// Scenario TargetChecks).
type Result struct {
	Scenario, Check string
	Pass            bool
	// NA marks a check that did not run (Pass is false, Reason says why):
	// it neither passes nor fails the target.
	NA bool
	// Reason says why it failed (the first failing run and what was wrong)
	// or why it did not run.
	Reason string
}

// TargetChecks is the Scenario of the checks about the whole target.
const TargetChecks = "(target)"

// Report is what Check found.
type Report struct {
	Info protocol.Info
	// Clock is the offset estimated before the runs; ClockAfter after
	// them.
	Clock, ClockAfter clockoffset.Offset
	Results           []Result
}

// Passed reports whether every check that ran passed.
func (r Report) Passed() bool {
	ran := 0
	for _, c := range r.Results {
		if c.NA {
			continue
		}
		if !c.Pass {
			return false
		}
		ran++
	}
	return ran > 0
}

// Write prints the report as a table.
func (r Report) Write(w io.Writer) error {
	fmt.Fprintf(w, "target: %s %s (protocol %s), clock offset %s ± %s, drift %s over the check\n", r.Info.Engine,
		r.Info.Version, r.Info.ProtocolString(), r.Clock.Offset, r.Clock.RTT/2, signed(r.ClockAfter.Offset-r.Clock.Offset))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcheck\tresult\treason")
	for _, c := range r.Results {
		res := "pass"
		switch {
		case c.NA:
			res = "n/a"
		case !c.Pass:
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Scenario, c.Check, res, c.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%s\n", verdict)
	return err
}

// The checks of each scenario, in report order.
const (
	checkCompletes  = "completes"
	checkRunID      = "answers name the run"
	checkSequence   = "event sequence"
	checkStepsOnce  = "every step exactly once"
	checkStartFirst = "start <= completion"
	checkOrder      = "run events bracket the run"
	checkStatus     = "status after terminal event"
	checkWindow     = "timestamps in the request window"
	checkLongPoll   = "long polls wait"
	checkHooks      = "hooks resume"
	checkResumeID   = "resume id deduplicated per run"
	checkRetention  = "timeline kept until DELETE"
	checkSpans      = "span events"
	checkAttribute  = "spans attribute"
)

var scenarioChecks = []string{checkCompletes, checkRunID, checkSequence, checkStepsOnce, checkStartFirst, checkOrder,
	checkStatus, checkWindow, checkLongPoll, checkHooks, checkResumeID, checkRetention, checkSpans, checkAttribute}

// The checks of the whole target.
const (
	checkClockBound  = "clock bound"
	checkClockSteady = "clock steady"
	checkConflict    = "409 on a repeated run id"
	checkUnsupported = "422 on what it cannot run"
	checkCodes       = "404 and 400"
)

// checkResumeID is the resume id of every hook the checker resumes, in
// every run: a target must deduplicate resume ids per run, so the same id
// resumes each run's hook once.
const checkResume = "check/resume-0"

// checker holds one Check's state.
type checker struct {
	c     *target.Client
	opt   Options
	info  protocol.Info
	clk   clockoffset.Offset
	bound time.Duration
	epoch time.Time
	// resumedBy is the run whose hook checkResume resumed first.
	resumedBy string
}

func (k *checker) now() time.Duration { return time.Since(k.epoch) }

// findings collects one scenario's results: the first reason each check
// failed, and which checks ran.
type findings struct {
	fail map[string]string
	ran  map[string]bool
	na   map[string]string
	// note is what a check that passed reports (an informational row's
	// figure).
	note map[string]string
	// unattributed is, per run whose spans were walked, the share of its
	// TTLS its critical path left unattributed.
	unattributed []float64
}

func newFindings() *findings {
	return &findings{fail: map[string]string{}, ran: map[string]bool{}, na: map[string]string{}, note: map[string]string{}}
}

func (f *findings) failf(check, format string, a ...any) {
	f.ran[check] = true
	if _, ok := f.fail[check]; !ok {
		f.fail[check] = fmt.Sprintf(format, a...)
	}
}

func (f *findings) passed(check string) { f.ran[check] = true }

func (f *findings) results(scenario string, checks []string) []Result {
	var out []Result
	for _, check := range checks {
		r := Result{Scenario: scenario, Check: check}
		switch reason, failed := f.fail[check]; {
		case failed:
			r.Reason = reason
		case f.ran[check]:
			r.Pass = true
			r.Reason = f.note[check]
		default:
			r.NA = true
			r.Reason = f.na[check]
			if r.Reason == "" {
				r.Reason = "did not run"
			}
		}
		out = append(out, r)
	}
	return out
}

// Run is the conformance checker an implementer runs: it runs every
// scenario the target declares (with OptionsFor's small options, or
// the scenario's defaults) a few times and validates each timeline, then
// the target's answers to what it must refuse, then its clock again. The
// error is about reaching the target at all (its info or its clock); every
// finding about runs is a failed check in the report, with its reason.
func Run(ctx context.Context, c *target.Client, opt Options) (Report, error) {
	if opt.Runs <= 0 {
		opt.Runs = 3
	}
	if opt.RunTimeout <= 0 {
		opt.RunTimeout = 30 * time.Second
	}
	if opt.Slack <= 0 {
		opt.Slack = 2 * time.Millisecond
	}
	if opt.MaxClockBound <= 0 {
		opt.MaxClockBound = time.Millisecond
	}
	if opt.HoldWait <= 0 {
		opt.HoldWait = 300 * time.Millisecond
	}
	info, err := c.Info(ctx)
	if err != nil {
		return Report{}, err
	}
	k := &checker{c: c, opt: opt, info: info, epoch: time.Now()}
	k.clk, err = target.EstimateClock(ctx, c, k.now)
	if err != nil {
		return Report{}, err
	}
	k.bound = k.clk.RTT/2 + opt.Slack
	rep := Report{Info: info, Clock: k.clk}
	tf := newFindings()
	for i, sc := range info.Scenarios {
		f := newFindings()
		book, err := scenarios.Get(sc.Name)
		if err != nil {
			f.failf(checkCompletes, "%v", err)
			rep.Results = append(rep.Results, f.results(sc.Name, scenarioChecks)...)
			continue
		}
		p, _, err := book.Build(scenarios.Values(OptionsFor[sc.Name]))
		if err != nil {
			f.failf(checkCompletes, "%v", err)
			rep.Results = append(rep.Results, f.results(sc.Name, scenarioChecks)...)
			continue
		}
		hooks := 0
		for _, st := range p.Stages {
			if st.Kind == engine.StageHook {
				hooks++
			}
		}
		if hooks == 0 {
			f.na[checkHooks] = "the scenario has no hook"
			f.na[checkResumeID] = "the scenario has no hook"
		}
		f.na[checkLongPoll] = "no poll had to wait (every answer had events or the run was over)"
		if info.Minor < protocol.MinorRelease {
			f.na[checkRetention] = "a protocol 1.0 target (DELETE is 1.1)"
		}
		f.na[checkSpans] = "the target sent no span event"
		if info.Minor < protocol.MinorSpans {
			f.na[checkSpans] = fmt.Sprintf("a protocol %s target that sent no span event (span events are 1.2)", info.ProtocolString())
		}
		f.na[checkAttribute] = f.na[checkSpans]
		for r := range opt.Runs {
			run := fmt.Sprintf("check-%d-%d-%d", k.epoch.UnixNano()%1e6, i, r)
			ok := k.checkRun(ctx, run, sc.Name, p, hooks, f)
			if i == 0 && r == 0 && ok {
				k.checkConflict(ctx, run, sc.Name, tf)
			}
			if ok && info.Minor >= protocol.MinorRelease {
				k.checkRelease(ctx, run, f)
			}
		}
		attribution(f, hooks, opt.HoldWait)
		rep.Results = append(rep.Results, f.results(sc.Name, scenarioChecks)...)
	}
	k.checkUnsupported(ctx, tf)
	k.checkCodes(ctx, tf)
	k.checkBatchPolls(ctx, tf)
	k.checkBatchStarts(ctx, tf)
	k.checkBatchStreams(ctx, tf)
	k.checkStartsAt(ctx, tf)
	// The clock: bounded at the start, and where it was after the runs.
	if b := k.clk.RTT / 2; b >= opt.MaxClockBound {
		tf.failf(checkClockBound, "clock error bound ± %s (best of %d round trips), over %s: every timestamp is uncertain by that much. "+
			"Answers are held on the way: Nagle's algorithm with delayed ACK (a server that writes headers and body in separate "+
			"writes: write them at once, or set TCP_NODELAY), a proxy in between, or a busy machine", b.Round(time.Microsecond),
			target.ClockProbes, opt.MaxClockBound)
	} else {
		tf.passed(checkClockBound)
	}
	after, err := target.EstimateClock(ctx, c, k.now)
	if err != nil {
		tf.failf(checkClockSteady, "the clock does not answer after the runs: %v", err)
	} else {
		rep.ClockAfter = after
		drift := after.Offset - k.clk.Offset
		if allowed := k.clk.RTT/2 + after.RTT/2 + opt.MaxClockBound; drift.Abs() > allowed {
			tf.failf(checkClockSteady, "the clock moved %s against durabench's during the check (more than ± %s): "+
				"it stepped or runs at another rate; take every timestamp from a monotonic clock", signed(drift.Round(time.Microsecond)),
				allowed.Round(time.Microsecond))
		} else {
			tf.passed(checkClockSteady)
		}
	}
	rep.Results = append(rep.Results, tf.results(TargetChecks,
		[]string{checkClockBound, checkClockSteady, checkConflict, checkUnsupported, checkCodes, checkBatch, checkBatchStart, checkBatchStream, checkStartAt})...)
	return rep, nil
}

// checkRun starts one run, follows it to its end (resuming its hooks) and
// records what is wrong with its timeline in f. ok reports whether the run
// reached a terminal answer.
func (k *checker) checkRun(ctx context.Context, run, scenario string, p engine.Program, hooks int, f *findings) (ok bool) {
	ctx, cancel := context.WithTimeout(ctx, k.opt.RunTimeout)
	defer cancel()
	sent := k.now()
	reply, err := k.c.Start(ctx, protocol.StartRequest{Run: run, Scenario: scenario, Options: OptionsFor[scenario], Spans: true})
	if err != nil {
		f.failf(checkCompletes, "%s: start: %s", run, k.explain(ctx, err))
		return false
	}
	if reply.Run != run {
		f.failf(checkRunID, "%s: the start answer names run %q", run, reply.Run)
	} else {
		f.passed(checkRunID)
	}
	type key struct{ stage, index int }
	starts := map[key]int64{}
	done := map[key]int{}
	received := map[string]int{}
	var events []protocol.Event
	var after int64
	var last time.Duration
	var resumedAt time.Duration
	wait := min(target.PollWait, k.opt.RunTimeout)
	for {
		asked := time.Now()
		tl, err := k.c.Timeline(ctx, run, after, wait)
		took := time.Since(asked)
		if err != nil {
			k.unfinished(ctx, run, err, events, resumedAt, hooks, f)
			return false
		}
		last = k.now()
		if tl.Run != run {
			f.failf(checkRunID, "%s: a timeline answer names run %q", run, tl.Run)
		} else {
			f.passed(checkRunID)
		}
		k.pollWaited(run, tl, wait, took, f)
		waiting := false
		for _, ev := range tl.Events {
			if ev.Seq != after+1 {
				f.failf(checkSequence, "%s: event seq %d after %d (want %d)", run, ev.Seq, after, after+1)
			} else {
				f.passed(checkSequence)
			}
			after = max(after, ev.Seq)
			events = append(events, ev)
			if ev.Kind == protocol.EventSpan {
				// Checked with the run's other spans (checkSpans).
				k.spanWindow(run, ev, sent, last, f)
				continue
			}
			at := k.clk.ToDriver(time.Duration(ev.At))
			if at < sent-k.bound || at > last+k.bound {
				f.failf(checkWindow, "%s: %s at %s, outside [%s, %s] (clock error bound %s)", run, ev.Kind,
					at.Round(time.Microsecond), sent.Round(time.Microsecond), last.Round(time.Microsecond), k.bound)
			} else {
				f.passed(checkWindow)
			}
			kk := key{ev.Stage, ev.Index}
			switch ev.Kind {
			case protocol.EventStepStarted:
				starts[kk] = ev.At
			case protocol.EventStepCompleted:
				done[kk]++
				if s, ok := starts[kk]; ok && s > ev.At {
					f.failf(checkStartFirst, "%s: step %d.%d completed %s before it started", run, ev.Stage, ev.Index,
						time.Duration(s-ev.At))
				} else {
					f.passed(checkStartFirst)
				}
			case protocol.EventHookReceived:
				received[ev.Token]++
			case protocol.EventHookWaiting:
				waiting = true
			}
		}
		if waiting && resumedAt == 0 && !tl.Terminal() {
			// The run waits on its hook: a long poll now has nothing to
			// return and must wait.
			asked := time.Now()
			hold, err := k.c.Timeline(ctx, run, after, k.opt.HoldWait)
			if err == nil {
				k.pollWaited(run, hold, k.opt.HoldWait, time.Since(asked), f)
			}
			// Then each waiting hook is resumed twice with the same
			// resume id (the second must be a no-op).
			resumedAt = k.now()
			for _, ev := range events {
				if ev.Kind != protocol.EventHookWaiting {
					continue
				}
				if k.resumedBy == "" {
					k.resumedBy = run
				}
				for range 2 {
					if err := k.c.Resume(ctx, run, ev.Token, protocol.ResumeRequest{ResumeID: checkResume}); err != nil {
						f.failf(checkHooks, "%s: resume of hook %s: %s", run, ev.Token, k.explain(ctx, err))
						break
					}
				}
			}
		}
		if tl.Terminal() {
			k.terminal(run, tl, events, f)
			k.spans(run, tl, events, sent, f)
			break
		}
	}
	if hooks > 0 {
		if resumedAt == 0 {
			f.failf(checkHooks, "%s: finished without a hook_waiting event, but the scenario waits on %d hook(s)", run, hooks)
		} else {
			f.passed(checkHooks)
		}
		switch {
		case len(received) == 0:
			f.na[checkResumeID] = "the target reports no hook_received: a repeated resume is not observable"
		default:
			for token, n := range received {
				if n > 1 {
					f.failf(checkResumeID, "%s: hook %s resumed twice with resume id %q recorded %d hook_received events: "+
						"a repeated resume id must be a no-op for its run", run, token, checkResume, n)
				}
			}
			f.passed(checkResumeID)
		}
	}
	var problems []string
	for kk, n := range done {
		if n != 1 {
			problems = append(problems, fmt.Sprintf("step %d.%d completed %d times", kk.stage, kk.index, n))
		}
	}
	if len(done) != p.StepCount() {
		problems = append(problems, fmt.Sprintf("%d distinct steps completed, the scenario has %d", len(done), p.StepCount()))
	}
	if len(problems) > 0 {
		f.failf(checkStepsOnce, "%s: %s", run, strings.Join(problems, "; "))
	} else {
		f.passed(checkStepsOnce)
	}
	return true
}

// pollWaited checks that a poll answered empty, its run still running,
// waited (at least half its wait).
func (k *checker) pollWaited(run string, tl protocol.Timeline, wait, took time.Duration, f *findings) {
	if len(tl.Events) > 0 || tl.Terminal() || wait <= 0 {
		return
	}
	if took < wait/2 {
		f.failf(checkLongPoll, "%s: a poll with wait=%s came back empty after %s, the run still running: "+
			"hold the answer until an event, the run's end or the wait's end", run, protocol.FormatWait(wait), took.Round(time.Millisecond))
		return
	}
	f.passed(checkLongPoll)
}

// terminal checks a run's terminal answer against its whole timeline.
func (k *checker) terminal(run string, tl protocol.Timeline, events []protocol.Event, f *findings) {
	f.passed(checkCompletes)
	if tl.Status != protocol.StatusCompleted {
		f.failf(checkCompletes, "%s: %s: %s", run, tl.Status, tl.Error)
	}
	want := protocol.EventRunCompleted
	if tl.Status == protocol.StatusFailed {
		want = protocol.EventRunFailed
	}
	// Span events are checked on their own rows (a span after the
	// terminal event: checkSpans).
	events = slices.DeleteFunc(slices.Clone(events), func(ev protocol.Event) bool { return ev.Kind == protocol.EventSpan })
	if len(events) == 0 || events[len(events)-1].Kind != want {
		lastKind := "none"
		if len(events) > 0 {
			lastKind = events[len(events)-1].Kind
		}
		f.failf(checkStatus, "%s: status %s while the timeline's last event is %s, not %s: the status must not "+
			"run ahead of the timeline (durabench would end the run on its own clock)", run, tl.Status, lastKind, want)
	} else {
		f.passed(checkStatus)
	}
	// The terminal event last, one of it, at most one run_started; a
	// hook's hook_received after its hook_waiting (in seq and in time).
	// Other events may be recorded out of time order (a worker reports a
	// body's start and end together; the reference stamps a body's end
	// after the commit that can end the run; Temporal's adapter stamps
	// run_started when the start call returns, the Workflow SDK's records
	// it after the first step may have begun).
	if len(events) == 0 {
		return
	}
	end := events[len(events)-1]
	if end.Kind != protocol.EventRunCompleted && end.Kind != protocol.EventRunFailed {
		return // reported by checkStatus
	}
	started := 0
	waiting := map[string]int64{}
	for _, ev := range events[:len(events)-1] {
		switch ev.Kind {
		case protocol.EventRunStarted:
			if started++; started > 1 {
				f.failf(checkOrder, "%s: a second %s (seq %d)", run, ev.Kind, ev.Seq)
				return
			}
		case protocol.EventRunCompleted, protocol.EventRunFailed:
			f.failf(checkOrder, "%s: %s (seq %d) before the terminal event (seq %d)", run, ev.Kind, ev.Seq, end.Seq)
			return
		case protocol.EventHookWaiting:
			waiting[ev.Token] = ev.At
		case protocol.EventHookReceived:
			at, ok := waiting[ev.Token]
			if !ok {
				f.failf(checkOrder, "%s: hook_received of hook %s (seq %d) before its hook_waiting", run, ev.Token, ev.Seq)
				return
			}
			if ev.At < at {
				f.failf(checkOrder, "%s: hook %s received %s before it was waiting", run, ev.Token, time.Duration(at-ev.At))
				return
			}
		}
	}
	f.passed(checkOrder)
}

// unfinished records a run that got no terminal answer: a timeout is said
// as what the run was doing, never as a raw transport error.
func (k *checker) unfinished(ctx context.Context, run string, err error, events []protocol.Event, resumedAt time.Duration,
	hooks int, f *findings) {
	if ctx.Err() == nil {
		f.failf(checkCompletes, "%s: %s", run, k.explain(ctx, err))
		return
	}
	lastKind := "no event"
	if len(events) > 0 {
		lastKind = "last " + events[len(events)-1].Kind
	}
	f.failf(checkCompletes, "%s: not finished after %s (still running, %d events, %s)", run, k.opt.RunTimeout, len(events), lastKind)
	if hooks > 0 && resumedAt != 0 {
		why := "the run did not go on after its hook was resumed"
		if k.resumedBy != "" && k.resumedBy != run {
			why = fmt.Sprintf("its hook was resumed with resume id %q, which resumed run %s's hook before: resume ids must be "+
				"deduplicated per run, never across runs (durabench uses the same ids in every run)", checkResume, k.resumedBy)
		}
		f.failf(checkHooks, "%s: not finished %s after its resume: %s", run, (k.now() - resumedAt).Round(time.Millisecond), why)
	}
}

// explain turns a client error into a reason: the target's answer, or
// what the checker was waiting for when it gave up.
func (k *checker) explain(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, protocol.ErrProtocol):
		return err.Error()
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", k.opt.RunTimeout)
	}
	return "the target did not answer: " + err.Error()
}

// checkConflict starts run again: the target must answer 409.
func (k *checker) checkConflict(ctx context.Context, run, scenario string, f *findings) {
	_, err := k.c.Start(ctx, protocol.StartRequest{Run: run, Scenario: scenario, Options: OptionsFor[scenario]})
	switch code := target.StatusOf(err); {
	case err == nil:
		f.failf(checkConflict, "%s started again with the same run id (202): answer 409 to a run id that exists", run)
	case code == http.StatusConflict:
		f.passed(checkConflict)
	default:
		f.failf(checkConflict, "%s started again: %s, want 409", run, k.explain(ctx, err))
	}
}

// checkRelease reads a finished run's whole timeline again, releases it
// and checks that the target forgot it.
func (k *checker) checkRelease(ctx context.Context, run string, f *findings) {
	again, err := k.c.Timeline(ctx, run, 0, 0)
	if err != nil {
		f.failf(checkRetention, "%s: its timeline read again before DELETE: %s", run, k.explain(ctx, err))
		return
	}
	if !again.Terminal() || len(again.Events) == 0 {
		f.failf(checkRetention, "%s: its timeline read again before DELETE: status %s, %d events", run, again.Status, len(again.Events))
		return
	}
	// A span recorded after the terminal answer was read comes now.
	for i, ev := range again.Events {
		if !ev.Terminal() {
			continue
		}
		for _, sp := range again.Events[i+1:] {
			if sp.Kind == protocol.EventSpan {
				f.failf(checkSpans, "%s: span event seq %d (%s) after the terminal event (seq %d): send every span before %s",
					run, sp.Seq, spanName(sp), ev.Seq, ev.Kind)
				break
			}
		}
		break
	}
	if err := k.c.Release(ctx, run); err != nil {
		f.failf(checkRetention, "%s: DELETE: %s", run, k.explain(ctx, err))
		return
	}
	_, err = k.c.Timeline(ctx, run, 0, 0)
	if code := target.StatusOf(err); code != http.StatusNotFound {
		f.failf(checkRetention, "%s: its timeline after DELETE: %v, want 404", run, errOrOK(err))
		return
	}
	f.passed(checkRetention)
}

// checkUnsupported asks for an unknown scenario and for an option over a
// declared limit: the target must answer 422.
func (k *checker) checkUnsupported(ctx context.Context, f *findings) {
	try := func(what string, req protocol.StartRequest) {
		_, err := k.c.Start(ctx, req)
		switch code := target.StatusOf(err); {
		case err == nil:
			f.failf(checkUnsupported, "%s: accepted (202): answer 422 to what the engine cannot run", what)
			_ = k.c.Release(ctx, req.Run)
		case code == http.StatusUnprocessableEntity:
			f.passed(checkUnsupported)
		default:
			f.failf(checkUnsupported, "%s: %s, want 422", what, k.explain(ctx, err))
		}
	}
	base := fmt.Sprintf("check-%d-", k.epoch.UnixNano()%1e6)
	try("an unknown scenario", protocol.StartRequest{Run: base + "unknown", Scenario: "no-such-scenario"})
	for _, sc := range k.info.Scenarios {
		for opt, limit := range sc.Max {
			try(fmt.Sprintf("%s with %s=%d (over its declared max %d)", sc.Name, opt, limit+1, limit),
				protocol.StartRequest{Run: base + "over-" + sc.Name, Scenario: sc.Name, Options: map[string]string{opt: fmt.Sprint(limit + 1)}})
			break
		}
	}
}

// checkCodes asks for an unknown run and sends a malformed start: 404
// and 400.
func (k *checker) checkCodes(ctx context.Context, f *findings) {
	run := fmt.Sprintf("check-%d-no-such-run", k.epoch.UnixNano()%1e6)
	_, err := k.c.Timeline(ctx, run, 0, 0)
	if code := target.StatusOf(err); code != http.StatusNotFound {
		f.failf(checkCodes, "the timeline of an unknown run: %v, want 404", errOrOK(err))
		return
	}
	err = k.c.Resume(ctx, run, "h0", protocol.ResumeRequest{ResumeID: checkResume})
	if code := target.StatusOf(err); code != http.StatusNotFound {
		f.failf(checkCodes, "a resume of an unknown run's hook: %v, want 404", errOrOK(err))
		return
	}
	err = k.c.Do(ctx, http.MethodPost, "/v1/runs", map[string]any{"run": 7}, nil, target.RequestTimeout)
	if code := target.StatusOf(err); code != http.StatusBadRequest {
		f.failf(checkCodes, `a start request {"run": 7}: %v, want 400`, errOrOK(err))
		return
	}
	f.passed(checkCodes)
}

// signed writes d with its sign, +1ms or -1ms.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

func errOrOK(err error) any {
	if err == nil {
		return "2xx"
	}
	return err
}
