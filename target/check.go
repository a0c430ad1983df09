package target

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durabench/durabench/clock"
	"github.com/durabench/durabench/scenarios"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// Runs per scenario (default 3).
	Runs int
	// RunTimeout bounds one run, from its start to its terminal timeline
	// (default 30 s).
	RunTimeout time.Duration
	// Slack is added to the clock's error bound (RTT/2) when checking that
	// timestamps fall inside a run's request window (default 2 ms).
	Slack time.Duration
}

// CheckOptionsFor are the small option values the checker runs each
// scenario with (a target must support at least these).
var CheckOptionsFor = map[string]map[string]string{
	"fanout":          {"branches": "8"},
	"sequential":      {"steps": "5"},
	"race":            {"branches": "4"},
	"payload":         {"steps": "3"},
	"stream-replay":   {"speed": "8"},
	"stream-sizes":    {"chunks": "12"},
	"stream-pipeline": {"chunks": "12"},
}

// CheckResult is one check of one scenario.
type CheckResult struct {
	Scenario, Check string
	Pass            bool
	// Reason says why it failed (the first failing run and what was wrong).
	Reason string
}

// CheckReport is what Check found.
type CheckReport struct {
	Info    Info
	Clock   clock.Offset
	Results []CheckResult
}

// Passed reports whether every check passed.
func (r CheckReport) Passed() bool {
	for _, c := range r.Results {
		if !c.Pass {
			return false
		}
	}
	return len(r.Results) > 0
}

// Write prints the report as a table.
func (r CheckReport) Write(w io.Writer) error {
	fmt.Fprintf(w, "target: %s %s (protocol %d), clock offset %s ± %s\n", r.Info.Engine, r.Info.Version, r.Info.Protocol,
		r.Clock.Offset, r.Clock.RTT/2)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcheck\tresult\treason")
	for _, c := range r.Results {
		res := "pass"
		if !c.Pass {
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

// The checks, in report order.
const (
	checkCompletes  = "completes"
	checkSequence   = "event sequence"
	checkStepsOnce  = "every step exactly once"
	checkStartFirst = "start <= completion"
	checkWindow     = "timestamps in the request window"
	checkHooks      = "hooks resume"
)

// Check is the conformance checker an implementer runs: it runs every
// scenario the target declares (with CheckOptionsFor's small options, or
// the scenario's defaults) a few times and validates each timeline. The
// error is about reaching the target at all (its info or its clock); every
// finding about runs is a failed check in the report.
func Check(ctx context.Context, c *Client, opt CheckOptions) (CheckReport, error) {
	if opt.Runs <= 0 {
		opt.Runs = 3
	}
	if opt.RunTimeout <= 0 {
		opt.RunTimeout = 30 * time.Second
	}
	if opt.Slack <= 0 {
		opt.Slack = 2 * time.Millisecond
	}
	info, err := c.Info(ctx)
	if err != nil {
		return CheckReport{}, err
	}
	epoch := time.Now()
	now := func() time.Duration { return time.Since(epoch) }
	var samples []clock.Sample
	for range ClockProbes {
		send := now()
		remote, err := c.Clock(ctx)
		if err != nil {
			return CheckReport{}, fmt.Errorf("clock of %s: %w", c.URL(), err)
		}
		samples = append(samples, clock.Sample{Send: send, Recv: now(), Remote: remote})
	}
	clk, _ := clock.Estimate(samples)
	rep := CheckReport{Info: info, Clock: clk}
	bound := clk.RTT/2 + opt.Slack
	for i, sc := range info.Scenarios {
		book, err := scenarios.Get(sc.Name)
		if err != nil {
			rep.Results = append(rep.Results, CheckResult{sc.Name, checkCompletes, false, "not a scenario of durabench's book"})
			continue
		}
		p, _, err := book.Build(scenarios.Values(CheckOptionsFor[sc.Name]))
		if err != nil {
			rep.Results = append(rep.Results, CheckResult{sc.Name, checkCompletes, false, err.Error()})
			continue
		}
		fails := map[string]string{}
		fail := func(check, format string, a ...any) {
			if _, ok := fails[check]; !ok {
				fails[check] = fmt.Sprintf(format, a...)
			}
		}
		for r := range opt.Runs {
			run := fmt.Sprintf("check-%d-%d-%d", epoch.UnixNano()%1e6, i, r)
			checkRun(ctx, c, run, sc.Name, CheckOptionsFor[sc.Name], p.StepCount(), clk, bound, now, opt.RunTimeout, fail)
		}
		for _, check := range []string{checkCompletes, checkSequence, checkStepsOnce, checkStartFirst, checkWindow, checkHooks} {
			reason, failed := fails[check]
			rep.Results = append(rep.Results, CheckResult{sc.Name, check, !failed, reason})
		}
	}
	return rep, nil
}

// checkRun starts one run, follows it to its end (resuming its hooks) and
// reports what is wrong with its timeline through fail.
func checkRun(ctx context.Context, c *Client, run, scenario string, opts map[string]string, steps int,
	clk clock.Offset, bound time.Duration, now func() time.Duration, timeout time.Duration,
	fail func(check, format string, a ...any)) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sent := now()
	if _, err := c.Start(ctx, StartRequest{Run: run, Scenario: scenario, Options: opts}); err != nil {
		fail(checkCompletes, "%s: start: %v", run, err)
		return
	}
	type key struct{ stage, index int }
	starts := map[key]int64{}
	done := map[key]int{}
	resumed := map[string]bool{}
	var after int64
	var last time.Duration
	for {
		tl, err := c.Timeline(ctx, run, after, min(PollWait, timeout))
		if err != nil {
			fail(checkCompletes, "%s: %v", run, err)
			return
		}
		last = now()
		for _, ev := range tl.Events {
			if ev.Seq != after+1 {
				fail(checkSequence, "%s: event seq %d after %d (want %d)", run, ev.Seq, after, after+1)
			}
			after = max(after, ev.Seq)
			at := clk.ToDriver(time.Duration(ev.At))
			if at < sent-bound || at > last+bound {
				fail(checkWindow, "%s: %s at %s, outside [%s, %s] (clock error bound %s)", run, ev.Kind,
					at.Round(time.Microsecond), sent.Round(time.Microsecond), last.Round(time.Microsecond), bound)
			}
			k := key{ev.Stage, ev.Index}
			switch ev.Kind {
			case EventStepStarted:
				starts[k] = ev.At
			case EventStepCompleted:
				done[k]++
				if s, ok := starts[k]; ok && s > ev.At {
					fail(checkStartFirst, "%s: step %d.%d completed %s before it started", run, ev.Stage, ev.Index,
						time.Duration(s-ev.At))
				}
			case EventHookWaiting:
				if !resumed[ev.Token] {
					resumed[ev.Token] = true
					if err := c.Resume(ctx, run, ev.Token, ResumeRequest{ResumeID: "check/" + ev.Token}); err != nil {
						fail(checkHooks, "%s: resume %s: %v", run, ev.Token, err)
					}
				}
			}
		}
		if tl.Terminal() {
			if tl.Status != StatusCompleted {
				fail(checkCompletes, "%s: %s: %s", run, tl.Status, tl.Error)
			}
			break
		}
	}
	var problems []string
	for k, n := range done {
		if n != 1 {
			problems = append(problems, fmt.Sprintf("step %d.%d completed %d times", k.stage, k.index, n))
		}
	}
	if len(done) != steps {
		problems = append(problems, fmt.Sprintf("%d distinct steps completed, the scenario has %d", len(done), steps))
	}
	if len(problems) > 0 {
		fail(checkStepsOnce, "%s: %s", run, strings.Join(problems, "; "))
	}
}
