package check

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/durabench/durabench/internal/target"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/scenarios"
)

// checkBatch is the target check of the batch timeline endpoint (batch 1).
const checkBatch = "batch polls"

// checkBatchPolls checks POST /v1/timelines of a target that declares it:
// a poll of a session with nothing to answer waits; a session's polls
// answer its runs only (a run of another session never), each from its
// first event to its terminal one; a listed run the target does not know
// is missing; a released run is forgotten (its timeline 404, no poll
// answers it). n/a for a target that does not declare batch, or declares
// no scenario without a hook.
func (k *checker) checkBatchPolls(ctx context.Context, f *findings) {
	if k.info.Batch < protocol.BatchPolls {
		f.na[checkBatch] = "the target declares no batch endpoint (info: batch)"
		return
	}
	scenario := ""
	for _, sc := range k.info.Scenarios {
		book, err := scenarios.Get(sc.Name)
		if err != nil {
			continue
		}
		p, _, err := book.Build(scenarios.Values(OptionsFor[sc.Name]))
		if err == nil && !slices.ContainsFunc(p.Stages, func(st engine.Stage) bool { return st.Kind == engine.StageHook }) {
			scenario = sc.Name
			break
		}
	}
	if scenario == "" {
		f.na[checkBatch] = "the target declares no scenario without a hook"
		return
	}
	base := fmt.Sprintf("check-%d-batch", k.epoch.UnixNano()%1e6)
	sessA, sessB := base+"-a", base+"-b"
	runA, runB := base+"-a1", base+"-b1"
	defer func() {
		_ = k.c.Release(ctx, runA)
		_ = k.c.Release(ctx, runB)
	}()

	// A session with no run: the poll waits.
	began := time.Now()
	r, err := k.c.Batch(ctx, protocol.BatchRequest{Session: sessA}, k.opt.HoldWait)
	if err != nil {
		f.failf(checkBatch, "a poll of a session with no run: %s", k.explain(ctx, err))
		return
	}
	if took := time.Since(began); len(r.Timelines) > 0 || took < k.opt.HoldWait/2 {
		f.failf(checkBatch, "a poll of a session with no run (wait %s) answered after %s with %d timelines: want none, after the wait",
			k.opt.HoldWait, took.Round(time.Millisecond), len(r.Timelines))
		return
	}
	for _, st := range []protocol.StartRequest{{Run: runA, Scenario: scenario, Session: sessA}, {Run: runB, Scenario: scenario, Session: sessB}} {
		st.Options = OptionsFor[scenario]
		if _, err := k.c.Start(ctx, st); err != nil {
			f.failf(checkBatch, "start %s in session %s: %s", st.Run, st.Session, k.explain(ctx, err))
			return
		}
	}
	// Session A's polls, to runA's terminal answer: runA's events only,
	// in sequence; runB never.
	var after int64
	deadline := time.Now().Add(k.opt.RunTimeout)
	for done := false; !done; {
		if time.Now().After(deadline) {
			f.failf(checkBatch, "%s did not reach a terminal answer of session %s's polls within %s (%d events read)", runA, sessA, k.opt.RunTimeout, after)
			return
		}
		req := protocol.BatchRequest{Session: sessA}
		if after > 0 {
			req.Runs = []protocol.Cursor{{Run: runA, After: after}}
		}
		r, err := k.c.Batch(ctx, req, target.PollWait)
		if err != nil {
			f.failf(checkBatch, "a poll of session %s: %s", sessA, k.explain(ctx, err))
			return
		}
		if len(r.Missing) > 0 {
			f.failf(checkBatch, "a poll of session %s: %v missing, want none", sessA, r.Missing)
			return
		}
		for _, tl := range r.Timelines {
			if tl.Run != runA {
				f.failf(checkBatch, "a poll of session %s answered run %q: want only its own run %s (%s is session %s's)", sessA, tl.Run, runA, runB, sessB)
				return
			}
			for _, ev := range tl.Events {
				if ev.Seq != after+1 {
					f.failf(checkBatch, "%s: event seq %d after %d in a poll of session %s: want each event once, in sequence", runA, ev.Seq, after, sessA)
					return
				}
				after = ev.Seq
				done = done || ev.Kind == protocol.EventRunCompleted || ev.Kind == protocol.EventRunFailed
			}
		}
	}
	// A listed run the target does not know is missing; a released run is
	// forgotten.
	unknown := base + "-no-such-run"
	r, err = k.c.Batch(ctx, protocol.BatchRequest{Session: sessA, Runs: []protocol.Cursor{{Run: runA, After: after}, {Run: unknown}}, Release: []string{runA}}, 0)
	if err != nil {
		f.failf(checkBatch, "a poll of session %s releasing %s: %s", sessA, runA, k.explain(ctx, err))
		return
	}
	if !slices.Contains(r.Missing, unknown) || !slices.Contains(r.Missing, runA) {
		f.failf(checkBatch, "a poll releasing %s, listing it and the unknown %s: missing %v, want both (released first, then answered)", runA, unknown, r.Missing)
		return
	}
	if slices.ContainsFunc(r.Timelines, func(tl protocol.Timeline) bool { return tl.Run == runA }) {
		f.failf(checkBatch, "a poll releasing %s answered its timeline: want it forgotten", runA)
		return
	}
	if _, err := k.c.Timeline(ctx, runA, 0, 0); target.StatusOf(err) != http.StatusNotFound {
		f.failf(checkBatch, "%s's timeline after its release in a batch poll: %v, want 404", runA, errOrOK(err))
		return
	}
	if why := k.awaitCompleted(ctx, runB); why != "" {
		f.failf(checkBatch, "%s (session %s's): %s", runB, sessB, why)
		return
	}
	f.passed(checkBatch)
}

// startScenario is the scenario the batch checks start runs of: step if
// the target declares it, else its first; false if it declares none.
func (k *checker) startScenario() (string, bool) {
	if len(k.info.Scenarios) == 0 {
		return "", false
	}
	for _, s := range k.info.Scenarios {
		if s.Name == "step" {
			return s.Name, true
		}
	}
	return k.info.Scenarios[0].Name, true
}

// checkBatchStart is the target check of batch starts (batch 2).
const checkBatchStart = "batch starts"

// checkBatchStarts checks POST /v1/starts of a target that declares batch
// 2: one batch of a new run, the same run id again and an unknown
// scenario answers each in order, 202, 409 and 422, and the started run
// completes. n/a for a target that declares less.
func (k *checker) checkBatchStarts(ctx context.Context, f *findings) {
	if k.info.Batch < protocol.BatchStarts {
		f.na[checkBatchStart] = "the target declares no batch starts (info: batch 2)"
		return
	}
	sc, ok := k.startScenario()
	if !ok {
		f.na[checkBatchStart] = "the target declares no scenario"
		return
	}
	run := fmt.Sprintf("check-%d-batch-start", k.epoch.UnixNano()%1e6)
	defer func() { _ = k.c.Release(ctx, run) }()
	opts := OptionsFor[sc]
	reqs := []protocol.StartRequest{{Run: run, Scenario: sc, Options: opts}, {Run: run, Scenario: sc, Options: opts},
		{Run: run + "-unknown", Scenario: "no-such-scenario"}}
	rep, err := k.c.Starts(ctx, reqs)
	if err != nil {
		f.failf(checkBatchStart, "a batch start: %s", k.explain(ctx, err))
		return
	}
	got := make([]int, len(rep.Started))
	for i, st := range rep.Started {
		got[i] = st.Code
		if st.Run != reqs[i].Run {
			f.failf(checkBatchStart, "a batch start's answer %d names run %q, want %q (answers in the request's order)", i, st.Run, reqs[i].Run)
			return
		}
	}
	// The first two may be answered in either order (concurrent starts of
	// one id): one 202, one 409.
	if !(got[0] == http.StatusAccepted && got[1] == http.StatusConflict || got[0] == http.StatusConflict && got[1] == http.StatusAccepted) ||
		got[2] != http.StatusUnprocessableEntity {
		f.failf(checkBatchStart, "a batch start of a new run, the same run id again and an unknown scenario answered %v, want [202 409 422] (the first two in either order)", got)
		return
	}
	if why := k.awaitCompleted(ctx, run); why != "" {
		f.failf(checkBatchStart, "%s (started in a batch): %s", run, why)
		return
	}
	f.passed(checkBatchStart)
}

// awaitCompleted follows run's timeline to its end: "" once it completed,
// else why not (failed, its timeline unreadable, or not over within
// RunTimeout). A check waits for every run it started, so that none is
// still running in the target when the check is over.
func (k *checker) awaitCompleted(ctx context.Context, run string) string {
	deadline := time.Now().Add(k.opt.RunTimeout)
	for {
		tl, err := k.c.Timeline(ctx, run, 0, time.Second)
		if err != nil {
			return "its timeline: " + k.explain(ctx, err)
		}
		if tl.Terminal() {
			if tl.Status != protocol.StatusCompleted {
				return fmt.Sprintf("%s %s", tl.Status, tl.Error)
			}
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not finished after %s", k.opt.RunTimeout)
		}
	}
}

// checkBatchStream is the target check of session streams (batch 3).
const checkBatchStream = "batch streams"

// checkBatchStreams checks POST /v1/sessions/{session}/stream of a target
// that declares batch 3: on one stream, a new run, the same run id again
// and an unknown scenario: the second and third are refused, 409 and 422,
// each on a line; the run's timeline comes in lines of its own, each
// event once and in sequence, to a terminal status that follows its
// terminal event; a run started in another session never comes. n/a for a
// target that declares less.
func (k *checker) checkBatchStreams(ctx context.Context, f *findings) {
	if k.info.Batch < protocol.BatchStreams {
		f.na[checkBatchStream] = "the target declares no batch streams (info: batch 3)"
		return
	}
	if !strings.HasPrefix(k.c.URL(), "http://") {
		f.na[checkBatchStream] = "a session stream is plain HTTP/1.1: durabench opens none to " + k.c.URL()
		return
	}
	sc, ok := k.startScenario()
	if !ok {
		f.na[checkBatchStream] = "the target declares no scenario"
		return
	}
	base := fmt.Sprintf("check-%d-stream", k.epoch.UnixNano()%1e6)
	run, other := base+"-a1", base+"-b1"
	defer func() {
		_ = k.c.Release(ctx, run)
		_ = k.c.Release(ctx, other)
	}()
	opts := OptionsFor[sc]
	// A run of another session, started first: the stream must not carry it.
	if _, err := k.c.Start(ctx, protocol.StartRequest{Run: other, Scenario: sc, Options: opts, Session: base + "-b"}); err != nil {
		f.failf(checkBatchStream, "start %s in session %s: %s", other, base+"-b", k.explain(ctx, err))
		return
	}
	st, err := k.c.OpenStream(ctx, base+"-a")
	if err != nil {
		f.failf(checkBatchStream, "open a stream: %s", k.explain(ctx, err))
		return
	}
	defer st.Close()
	now := func() time.Duration { return 0 }
	for _, req := range []protocol.StartRequest{{Run: run, Scenario: sc, Options: opts}, {Run: run, Scenario: sc, Options: opts},
		{Run: run + "-unknown", Scenario: "no-such-scenario"}} {
		if _, err := st.Start(req, now); err != nil {
			f.failf(checkBatchStream, "write a start on the stream: %v", err)
			return
		}
	}
	// Read to the run's terminal line and the three start results, or
	// until RunTimeout.
	type line struct {
		m   protocol.StreamMessage
		err error
	}
	lines := make(chan line)
	go func() {
		for {
			m, err := st.Next()
			if m.Timeline != nil { // the next Next reuses its events' array
				tl := *m.Timeline
				tl.Events = slices.Clone(tl.Events)
				m.Timeline = &tl
			}
			select {
			case lines <- line{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timeout := time.After(k.opt.RunTimeout)
	var codes []int
	var after int64
	ended := false
	for !ended || len(codes) < 2 {
		var l line
		select {
		case l = <-lines:
		case <-timeout:
			f.failf(checkBatchStream, "within %s: %d start refusals of 2, %s's timeline read to seq %d and terminal %v",
				k.opt.RunTimeout, len(codes), run, after, ended)
			return
		}
		if l.err != nil {
			f.failf(checkBatchStream, "the stream, after %d start results and %d of %s's events: %v", len(codes), after, run, l.err)
			return
		}
		if r := l.m.Started; r != nil {
			if r.Run != run && r.Run != run+"-unknown" {
				f.failf(checkBatchStream, "a start result for run %q: want results of the stream's own starts only", r.Run)
				return
			}
			if r.Code/100 != 2 { // a 202 line is allowed, not asked for
				codes = append(codes, r.Code)
			}
			continue
		}
		tl := *l.m.Timeline
		if tl.Run != run {
			f.failf(checkBatchStream, "the stream of session %s carried run %q: want only its own run %s (%s is session %s's)", base+"-a", tl.Run, run, other, base+"-b")
			return
		}
		for _, ev := range tl.Events {
			if ev.Seq != after+1 {
				f.failf(checkBatchStream, "%s: event seq %d after %d on the stream: want each event once, in sequence", run, ev.Seq, after)
				return
			}
			after = ev.Seq
			if ev.Terminal() && !ended {
				ended = true
				if ev.Kind != protocol.EventRunCompleted {
					f.failf(checkBatchStream, "%s: %s %s", run, ev.Kind, cmp.Or(ev.Error, tl.Error))
					return
				}
			}
		}
		// The status comes with the terminal event or in a later line
		// (docs/target-protocol.md): a line may carry the event while its
		// status still reads running, never the other way round.
		if tl.Terminal() && !ended {
			f.failf(checkBatchStream, "%s: a line with status %s before its terminal event: want the status to follow the event", run, tl.Status)
			return
		}
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{http.StatusConflict, http.StatusUnprocessableEntity}) {
		f.failf(checkBatchStream, "a new run, the same run id again and an unknown scenario on a stream: refusals %v, want 409 and 422 (an accepted start is answered by its timeline only)", codes)
		return
	}
	// The other session's run, followed to its end: a check leaves no run
	// running in the target (a DBOS test counting its successful
	// workflows after the check missed this one under load).
	if why := k.awaitCompleted(ctx, other); why != "" {
		f.failf(checkBatchStream, "%s (session %s's): %s", other, base+"-b", why)
		return
	}
	f.passed(checkBatchStream)
}
