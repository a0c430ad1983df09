package target_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/check"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// serveReference serves the reference engine of version v on a mem world
// over HTTP on loopback.
func serveReference(t *testing.T, v string) *httptest.Server {
	t.Helper()
	ver, err := engine.LookupVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := protocol.NewServer(context.Background(), reference.New(mem.New(world.Options{}), ver))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs
}

// runCell runs one cell of scenario (with opts) through the protocol and
// returns the driver's result.
func runCell(t *testing.T, url, prefix, scenario string, opts map[string]string, reps int) (*driver.Result, error) {
	t.Helper()
	return runCellMode(t, url, prefix, scenario, opts, reps, "stream")
}

// modes are how a session reaches a target that serves everything (the
// built-in server): a session stream (batch 3), batch starts and polls
// (batch 2), a request per start and per timeline poll.
var modes = []string{"stream", "batch", "per-run"}

// client is a client of url that uses mode (one of modes; "stream": what
// the target declares).
func client(t *testing.T, url, mode string) *target.Client {
	t.Helper()
	c, err := target.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "batch":
		c.MaxBatch = protocol.BatchStarts
	case "per-run":
		c.PerRun = true
	}
	return c
}

// runCellMode is runCell, the session reaching the target by mode.
func runCellMode(t *testing.T, url, prefix, scenario string, opts map[string]string, reps int, mode string) (*driver.Result, error) {
	t.Helper()
	return runCellSpans(t, url, prefix, scenario, opts, reps, mode, false)
}

// runCellSpans is runCellMode; with spans, the session asks the target
// for its runs' span events (protocol 1.2), as a sweep does for a cell
// that reports TTLS.
func runCellSpans(t *testing.T, url, prefix, scenario string, opts map[string]string, reps int, mode string, spans bool) (*driver.Result, error) {
	t.Helper()
	pacer, err := driver.NewPacer("closed", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runCellPaced(t, url, prefix, scenario, opts, reps, mode, spans, pacer, 1)
}

// runCellPaced is runCellSpans with the cell's pacer and warm-up runs.
func runCellPaced(t *testing.T, url, prefix, scenario string, opts map[string]string, reps int, mode string, spans bool,
	pacer driver.Pacer, warmup int) (*driver.Result, error) {
	t.Helper()
	ctx := context.Background()
	c := client(t, url, mode)
	sc, err := scenarios.Get(scenario)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		t.Fatal(err)
	}
	local := mem.New(world.Options{}) // the driver's clock only
	defer local.Close()
	sess, err := target.NewSession(ctx, c, scenario, opts, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	sess.Spans = spans
	return driver.Run(ctx, driver.Config{World: local, Program: p, RunPrefix: prefix, Reps: reps, Warmup: warmup,
		Pacer: pacer, CellTimeout: 30 * time.Second, Target: sess})
}

// TestReferenceOverTheProtocol: the reference engine served over HTTP runs
// fan-outs, a hook step and a stream through the driver like the in-process
// engine: every run finishes, every step body is reported once with a
// start before its end, hooks are resumed through the protocol, and the
// timestamps land on the driver's clock inside the run's window — on a
// session stream (the built-in server declares batch 3), with batch starts
// and polls, and with a request per start and per poll.
func TestReferenceOverTheProtocol(t *testing.T) {
	hs := serveReference(t, "pending-count")
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { referenceCells(t, hs.URL, mode) })
	}
}

func referenceCells(t *testing.T, url, mode string) {
	for i, tc := range []struct {
		scenario string
		opts     map[string]string
		steps    int
	}{
		{"fanout", map[string]string{"branches": "20"}, 20},
		{"fanout", map[string]string{"branches": "256"}, 256},
		{"hook-step", nil, 1},
		{"sequential", map[string]string{"steps": "30"}, 30},
		{"race", map[string]string{"branches": "4"}, 5},
		{"payload", map[string]string{"steps": "3", "size": "64KB"}, 3},
		{"stream-replay", map[string]string{"speed": "8"}, 2},
		{"stream-sizes", map[string]string{"chunks": "30", "interval": "1ms", "sizes": "10/1KB"}, 2},
		{"stream-pipeline", map[string]string{"chunks": "30", "size": "1KB"}, 3},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			res, err := runCellMode(t, url, fmt.Sprint("c", i, mode), tc.scenario, tc.opts, 5, mode)
			if err != nil {
				t.Fatal(err)
			}
			if res.TimedOut || len(res.Timelines) != 5 {
				t.Fatalf("timed out %v, %d timelines", res.TimedOut, len(res.Timelines))
			}
			for _, tl := range res.Timelines {
				if !tl.Finished || tl.Failed {
					t.Fatalf("run %s: finished %v failed %v (%s)", tl.ID, tl.Finished, tl.Failed, tl.Error)
				}
				if len(tl.Steps) != tc.steps {
					t.Fatalf("run %s: %d step bodies, want %d", tl.ID, len(tl.Steps), tc.steps)
				}
				if tc.scenario == "stream-sizes" {
					if len(tl.Chunks) != 30 {
						t.Fatalf("run %s: %d chunks read, want 30", tl.ID, len(tl.Chunks))
					}
					for _, c := range tl.Chunks {
						if want := []int{10, 1024}[c.Index%2]; c.Bytes != want {
							t.Fatalf("run %s chunk %d: %d bytes reported, want %d", tl.ID, c.Index, c.Bytes, want)
						}
					}
				}
				for _, s := range tl.Steps {
					if s.End < s.Start || s.Start < tl.T0-5*time.Millisecond || s.End > tl.Done+5*time.Millisecond {
						t.Fatalf("run %s step %d.%d: [%v, %v] outside the run [%v, %v]", tl.ID, s.Stage, s.Index, s.Start, s.End, tl.T0, tl.Done)
					}
				}
			}
		})
	}
}

// TestUnsupportedAndBrokenTargets: a scenario the target does not know, a
// target that answers garbage and one that is not there fail runs with the
// target's message — counted errors, never a hang.
func TestUnsupportedAndBrokenTargets(t *testing.T) {
	hs := serveReference(t, "baseline")
	c, _ := target.NewClient(hs.URL)
	_, err := c.Start(context.Background(), protocol.StartRequest{Run: "x", Scenario: "no-such-scenario"})
	if err == nil || !strings.Contains(err.Error(), "422") {
		t.Fatalf("unknown scenario: %v, want a 422 naming it", err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := info.Supports("fanout", map[string]string{"branches": "20000"}); ok || !strings.Contains(why, "limit") {
		t.Fatalf("20,000 branches supported %v (%s); want skipped over its limit", ok, why)
	}
	// Start refuses a fan-out over the limit every time (the reference
	// keeps what it built per scenario and options, refusals too) and
	// still starts one within it.
	for i := range 2 {
		_, err := c.Start(context.Background(), protocol.StartRequest{Run: fmt.Sprintf("big%d", i), Scenario: "fanout",
			Options: map[string]string{"branches": "20000"}})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("start %d of 20,000 branches: %v, want refused over the limit", i+1, err)
		}
	}
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "small", Scenario: "fanout",
		Options: map[string]string{"branches": "4"}}); err != nil {
		t.Fatalf("4 branches after a refused 20,000: %v", err)
	}

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/clock"):
			_, _ = w.Write([]byte(`{"now": 1}`))
		case r.URL.Path == "/v1/runs":
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"run":"x"}`))
		default:
			_, _ = w.Write([]byte(`<html>not json</html>`))
		}
	}))
	defer garbage.Close()
	began := time.Now()
	_, err = runCell(t, garbage.URL, "g", "fanout", map[string]string{"branches": "4"}, 2)
	if !errors.Is(err, driver.ErrStart) || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("a cell against garbage: %v; want every run failed with the decode error", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("garbage took %s to fail", took)
	}
}

// sinkFilter wraps a Backend and rewrites what it reports.
type sinkFilter struct {
	protocol.Backend
	edit     func(run string, ev *protocol.Event) bool // false drops the event
	noFinish bool                                      // never report a run finished
}

func (f *sinkFilter) Open(ctx context.Context, sink protocol.Sink) error {
	return f.Backend.Open(ctx, filteredSink{sink, f.edit, f.noFinish})
}

type filteredSink struct {
	protocol.Sink
	edit     func(run string, ev *protocol.Event) bool
	noFinish bool
}

func (s filteredSink) Finished(run string, failed bool, msg string) {
	if !s.noFinish {
		s.Sink.Finished(run, failed, msg)
	}
}

func (s filteredSink) Event(run string, ev protocol.Event) {
	if s.edit(run, &ev) {
		s.Sink.Event(run, ev)
	}
}

func serveBackend(t *testing.T, b protocol.Backend) string {
	t.Helper()
	srv, err := protocol.NewServer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs.URL
}

func checkURL(t *testing.T, url string, runs int, timeout time.Duration) check.Report {
	t.Helper()
	c, err := target.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := check.Run(context.Background(), c, check.Options{Runs: runs, RunTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func failed(rep check.Report, name string) string {
	for _, r := range rep.Results {
		if r.Check == name && !r.Pass {
			return r.Reason
		}
	}
	return ""
}

// TestCheck: the checker passes the reference engine on every scenario of
// the book, and fails, with the reason, a target that drops a step, one
// whose timestamps are skewed against its clock, and one that never
// finishes a run.
func TestCheck(t *testing.T) {
	ref := func() protocol.Backend {
		v, _ := engine.LookupVersion("pending-count")
		return reference.New(mem.New(world.Options{}), v)
	}
	rep := checkURL(t, serveBackend(t, ref()), 2, 10*time.Second)
	var out strings.Builder
	_ = rep.Write(&out)
	if !rep.Passed() {
		t.Fatalf("reference fails the checker:\n%s", out.String())
	}
	if len(rep.Results) < 6*len(scenarios.All()) {
		t.Fatalf("%d checks for %d scenarios", len(rep.Results), len(scenarios.All()))
	}

	var dropped atomic.Bool
	drop := checkURL(t, serveBackend(t, &sinkFilter{Backend: ref(), edit: func(_ string, ev *protocol.Event) bool {
		if ev.Kind == protocol.EventStepCompleted && ev.Index == 3 && dropped.CompareAndSwap(false, true) {
			return false
		}
		return true
	}}), 1, 5*time.Second)
	if r := failed(drop, "every step exactly once"); !strings.Contains(r, "distinct steps completed") {
		t.Errorf("a dropped step: reason %q", r)
	}

	skew := checkURL(t, serveBackend(t, &sinkFilter{Backend: ref(), edit: func(_ string, ev *protocol.Event) bool {
		ev.At += int64(2 * time.Second)
		return true
	}}), 1, 5*time.Second)
	if r := failed(skew, "timestamps in the request window"); !strings.Contains(r, "outside") {
		t.Errorf("a skewed clock: reason %q", r)
	}

	never := checkURL(t, serveBackend(t, &sinkFilter{Backend: ref(), edit: func(_ string, ev *protocol.Event) bool {
		return ev.Kind != protocol.EventRunCompleted
	}, noFinish: true}), 1, time.Second)
	if r := failed(never, "completes"); r == "" {
		t.Errorf("a target whose runs never finish passes 'completes'")
	}
}

// instant is an engine whose runs finish as they start: one step, its
// events stamped on a monotonic clock.
type instant struct {
	sink  protocol.Sink
	epoch time.Time
}

func (i *instant) Info() protocol.Info {
	return protocol.Info{Protocol: 1, Minor: 1, Engine: "instant", Scenarios: []protocol.Scenario{{Name: "step"}}}
}
func (i *instant) Now() time.Duration { return time.Since(i.epoch) }
func (i *instant) Open(_ context.Context, sink protocol.Sink) error {
	i.sink, i.epoch = sink, time.Now()
	return nil
}
func (i *instant) Start(_ context.Context, req protocol.StartRequest) error {
	for _, k := range []string{protocol.EventRunStarted, protocol.EventStepStarted, protocol.EventStepCompleted, protocol.EventRunCompleted} {
		i.sink.Event(req.Run, protocol.Event{Kind: k, At: int64(i.Now()), Source: protocol.SourceWorker})
	}
	i.sink.Finished(req.Run, false, "")
	return nil
}
func (i *instant) Resume(context.Context, string, string, protocol.ResumeRequest) error { return nil }
func (i *instant) Close(context.Context) error                                          { return nil }

// TestServerRetention: a server keeps every finished run's timeline until
// durabench releases it (DELETE), however many runs finished since — the
// driver far behind its schedule finds them all — and forgets runs nobody
// released only after its time-based fallback.
func TestServerRetention(t *testing.T) {
	srv, err := protocol.NewServer(context.Background(), &instant{})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec.Code
	}
	const n = 10000 // more than the 4,096 the server once kept
	for i := range n {
		if c := do("POST", "/v1/runs", fmt.Sprintf(`{"run":"r%d","scenario":"step"}`, i)); c != http.StatusAccepted {
			t.Fatalf("start r%d: %d", i, c)
		}
	}
	for i := range n {
		if c := do("GET", fmt.Sprintf("/v1/runs/r%d/timeline?after=0&wait=0ms", i), ""); c != http.StatusOK {
			t.Fatalf("timeline of r%d after %d runs finished: %d, want 200", i, n, c)
		}
	}
	if c := do("DELETE", "/v1/runs/r0", ""); c != http.StatusNoContent {
		t.Fatalf("DELETE r0: %d", c)
	}
	if c := do("GET", "/v1/runs/r0/timeline", ""); c != http.StatusNotFound {
		t.Fatalf("r0 after its DELETE: %d, want 404", c)
	}
	if c := do("DELETE", "/v1/runs/r0", ""); c != http.StatusNotFound {
		t.Fatalf("a second DELETE of r0: %d, want 404", c)
	}
	if c := do("GET", "/v1/runs/r1/timeline?wait=5s&after=x", ""); c != http.StatusBadRequest {
		t.Fatalf("after=x: %d, want 400", c)
	}

	srv.Retain = 20 * time.Millisecond
	time.Sleep(50 * time.Millisecond)
	do("POST", "/v1/runs", `{"run":"late","scenario":"step"}`) // its end expires the others
	if c := do("GET", "/v1/runs/r1/timeline", ""); c != http.StatusNotFound {
		t.Fatalf("r1 unreleased past the fallback: %d, want 404", c)
	}
	if c := do("GET", "/v1/runs/late/timeline", ""); c != http.StatusOK {
		t.Fatalf("a run within the fallback: %d, want 200", c)
	}
}

// TestStatusAheadOfTerminalEvent: when a target says a run completed 50 ms
// before its run_completed event is in the timeline, the session waits for
// the event and the run ends at the event's time, not when the driver
// heard of it — on a stream (which writes the event when it comes), with
// batch polls (which a busy session's other runs answer at once) and with
// per-run polls.
func TestStatusAheadOfTerminalEvent(t *testing.T) {
	url := serveBackend(t, lateEnd{only{newRef(t), []string{"step"}}})
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			res, err := runCellMode(t, url, "late"+mode, "step", nil, 8, mode)
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range res.Timelines {
				if !tl.Finished || tl.Failed || len(tl.Steps) != 1 {
					t.Fatalf("run %s: finished %v failed %v, %d steps (%s)", tl.ID, tl.Finished, tl.Failed, len(tl.Steps), tl.Error)
				}
				if gap := tl.Done - tl.Steps[0].End; gap > 25*time.Millisecond {
					t.Errorf("run %s ended %s after its step: on the driver's clock, not at its terminal event", tl.ID, gap)
				}
			}
		})
	}
}

// gatedStarts is a backend that accepts no start until hold after the
// first one arrived: the starts sent before then keep the session's
// senders busy, and every other start waits in its queue. It notes when
// the gate opened on clock (the driver's) and which runs arrived before.
type gatedStarts struct {
	protocol.Backend
	hold  time.Duration
	clock world.Runtime
	once  sync.Once
	gate  chan struct{}
	mu    sync.Mutex
	at    time.Duration   // when the gate opened
	early map[string]bool // runs whose start arrived with the gate shut
}

func (g *gatedStarts) Start(ctx context.Context, req protocol.StartRequest) error {
	g.once.Do(func() {
		time.AfterFunc(g.hold, func() {
			g.mu.Lock()
			g.at = g.clock.Now()
			g.mu.Unlock()
			close(g.gate)
		})
	})
	select {
	case <-g.gate:
	default:
		g.mu.Lock()
		g.early[req.Run] = true
		g.mu.Unlock()
		<-g.gate
	}
	return g.Backend.Start(ctx, req)
}

// TestBatchedStartLagCountsTheQueue: a batched start (batch 2) that waits
// for one of the session's senders left the driver late, and its run's lag
// says so — not the engine's TTFS alone. At 1,000 runs/s against a target
// that accepts no start for 40 ms, the session's (at most four) senders
// are busy with the first starts; a start that went out after them was
// sent once one came back, after the gate opened: its lag is at least the
// gate's time less its schedule, whatever the machine's load. Measured
// when StartRun was called, lag read about 0 (p50 29 ns, max 1 ms); a
// bound drawn from the pacer's schedule alone failed under load (a late
// pacer's burst puts many runs in the first four starts).
func TestBatchedStartLagCountsTheQueue(t *testing.T) {
	v, err := engine.LookupVersion("resilient")
	if err != nil {
		t.Fatal(err)
	}
	local := mem.New(world.Options{})
	defer local.Close()
	g := &gatedStarts{Backend: reference.New(mem.New(world.Options{}), v), hold: 40 * time.Millisecond,
		clock: local.Runtime(), gate: make(chan struct{}), early: map[string]bool{}}
	url := serveBackend(t, g)
	ctx := context.Background()
	c := client(t, url, "batch")
	sess, err := target.NewSession(ctx, c, "step", nil, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := scenarios.Get("step")
	p, _, _ := sc.Build(scenarios.Values(nil))
	res, err := driver.Run(ctx, driver.Config{World: local, Program: p, RunPrefix: "queued", Reps: 60,
		Pacer: driver.OpenRate{Rate: 1000}, CellTimeout: 30 * time.Second, Target: sess})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lag) != 60 || len(res.Timelines) != 60 {
		t.Fatalf("%d lags, %d runs: want 60", len(res.Lag), len(res.Timelines))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	queued := 0
	for i, tl := range res.Timelines {
		if !tl.Finished || tl.Failed {
			t.Fatalf("run %s: finished %v failed %v %s", tl.ID, tl.Finished, tl.Failed, tl.Error)
		}
		lag := res.Lag[i]
		if lag < 0 {
			t.Fatalf("run %s: lag %v, negative", tl.ID, lag)
		}
		if g.early[tl.ID] || tl.T0 > g.at-10*time.Millisecond {
			continue
		}
		queued++
		if want := g.at - tl.T0; lag < want {
			t.Errorf("run %s: lag %v, want >= %v: it waited for a sender until the target accepted starts", tl.ID, lag, want)
		}
	}
	if queued < 5 {
		t.Fatalf("%d runs waited >= 10 ms for a sender: want >= 5 to test their lag", queued)
	}
}

// TestStreamBreaks: a session stream the target drops in the middle of a
// cell fails the runs in flight on it, each with why (counted at once,
// not left to the cell's timeout), and the runs after it open a new
// stream and complete.
func TestStreamBreaks(t *testing.T) {
	v, err := engine.LookupVersion("resilient")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv, err := protocol.NewServer(ctx, reference.New(mem.New(world.Options{}), v))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := client(t, hs.URL, "stream")
	local := mem.New(world.Options{})
	defer local.Close()
	opts := map[string]string{"body": "100ms"}
	sess, err := target.NewSession(ctx, c, "step", opts, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	if !sess.SendsOnly() {
		t.Fatal("the session does not use the built-in server's stream")
	}
	sc, _ := scenarios.Get("step")
	p, _, _ := sc.Build(scenarios.Values(opts))
	// 100 runs/s for 0.6 s, each 100 ms long: about ten in flight when
	// the connections drop at 300 ms.
	go func() {
		time.Sleep(300 * time.Millisecond)
		hs.CloseClientConnections()
	}()
	began := time.Now()
	res, err := driver.Run(ctx, driver.Config{World: local, Program: p, RunPrefix: "broken", Reps: 60,
		Pacer: driver.OpenRate{Rate: 100}, CellTimeout: 30 * time.Second, Target: sess})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); res.TimedOut || took > 5*time.Second {
		t.Fatalf("timed out %v after %s: the runs on the dropped stream were waited for", res.TimedOut, took)
	}
	var lost, done int
	for _, tl := range res.Timelines {
		switch {
		case tl.Failed:
			lost++
			if !strings.Contains(tl.Error, "stream") && !strings.Contains(tl.Error, "connection") {
				t.Errorf("run %s failed with %q: want the stream's failure", tl.ID, tl.Error)
			}
		case tl.Finished:
			done++
		}
	}
	if lost == 0 || lost > 30 || done < 25 {
		t.Fatalf("%d runs failed, %d finished of 60: want the runs in flight at the drop failed and those after it run on a new stream", lost, done)
	}
}

// TestStreamRefusesAFinishedRunsID: a run a stream wrote to its end is
// forgotten by the server, yet its id started again on the stream is
// refused 409, as while the server held it (the reference engine itself
// would take the start again).
func TestStreamRefusesAFinishedRunsID(t *testing.T) {
	hs := serveReference(t, "baseline")
	c := client(t, hs.URL, "stream")
	st, err := c.OpenStream(context.Background(), "dup-session")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := func() time.Duration { return 0 }
	start := protocol.StartRequest{Run: "dup-1", Scenario: "step"}
	if _, err := st.Start(start, now); err != nil {
		t.Fatal(err)
	}
	for ended := false; !ended; {
		m, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.Started != nil {
			t.Fatalf("the first start was refused: %+v", *m.Started)
		}
		ended = m.Timeline.Terminal()
	}
	if _, err := st.Start(start, now); err != nil {
		t.Fatal(err)
	}
	m, err := st.Next()
	if err != nil || m.Started == nil || m.Started.Code != http.StatusConflict {
		t.Fatalf("the finished run's id again: %+v, %v; want refused 409", m, err)
	}
}

// heldStart is the instant engine, whose start of run "held" does not
// return until release is closed.
type heldStart struct {
	instant
	release chan struct{}
}

func (h *heldStart) Start(ctx context.Context, req protocol.StartRequest) error {
	if req.Run == "held" {
		<-h.release
	}
	return h.instant.Start(ctx, req)
}

// TestStreamStartsAlongsideASlowOne: a session stream's starts run side
// by side: a start the engine takes its time over (the server runs each
// start where its line was read, and hands the reading on) holds no
// start sent after it. The second run ends while the first's start has
// not returned; the first ends once it does.
func TestStreamStartsAlongsideASlowOne(t *testing.T) {
	h := &heldStart{release: make(chan struct{})}
	c := client(t, serveBackend(t, h), "stream")
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(h.release) }) }) // before the server's own
	st, err := c.OpenStream(context.Background(), "held-session")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := func() time.Duration { return 0 }
	for _, run := range []string{"held", "next"} {
		if _, err := st.Start(protocol.StartRequest{Run: run, Scenario: "step"}, now); err != nil {
			t.Fatal(err)
		}
	}
	ends := make(chan string, 2)
	go func() {
		defer close(ends)
		for {
			m, err := st.Next()
			if err != nil {
				return
			}
			if m.Started != nil {
				ends <- fmt.Sprintf("refused %+v", *m.Started)
				return
			}
			if m.Timeline != nil && m.Timeline.Terminal() {
				ends <- m.Timeline.Run
			}
		}
	}()
	ended := func() string {
		t.Helper()
		select {
		case run := <-ends:
			return run
		case <-time.After(10 * time.Second):
			t.Fatal("no run ended in 10 s")
			return ""
		}
	}
	if run := ended(); run != "next" {
		t.Fatalf("run %q ended first, want next (held's start has not returned)", run)
	}
	release.Do(func() { close(h.release) })
	if run := ended(); run != "held" {
		t.Fatalf("run %q ended, want held once its start returned", run)
	}
}
