package target_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// only declares some of a backend's scenarios (a faulty adapter's check
// then runs only what shows its fault).
type only struct {
	protocol.Backend
	names []string
}

func (o only) Info() protocol.Info {
	info := o.Backend.Info()
	info.Scenarios = slices.DeleteFunc(info.Scenarios, func(s protocol.Scenario) bool { return !slices.Contains(o.names, s.Name) })
	return info
}

func newRef(t *testing.T) protocol.Backend {
	t.Helper()
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		t.Fatal(err)
	}
	return reference.New(mem.New(world.Options{}), v)
}

// serveHandler serves a backend behind wrap (a middleware that breaks the
// protocol on the wire).
func serveHandler(t *testing.T, b protocol.Backend, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv, err := protocol.NewServer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wrap(srv))
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs.URL
}

// rewrite answers r through h, then lets edit change the decoded JSON
// answer.
func rewrite(h http.Handler, w http.ResponseWriter, r *http.Request, edit func(map[string]any)) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var m map[string]any
	if json.Unmarshal(rec.Body.Bytes(), &m) != nil {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	edit(m)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Code)
	_ = json.NewEncoder(w).Encode(m)
}

// nagleConn writes an HTTP answer's headers and body in two writes with a
// pause between them: what Nagle's algorithm and a delayed ACK do to a
// server that writes them separately (Python's http.server).
type nagleConn struct {
	net.Conn
	delay time.Duration
}

func (c nagleConn) Write(b []byte) (int, error) {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 || i+4 == len(b) {
		return c.Conn.Write(b)
	}
	n, err := c.Conn.Write(b[:i+4])
	if err != nil {
		return n, err
	}
	time.Sleep(c.delay)
	m, err := c.Conn.Write(b[i+4:])
	return n + m, err
}

type nagleListener struct {
	net.Listener
	delay time.Duration
}

func (l nagleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return nagleConn{c, l.delay}, nil
}

// stepClock is a target whose clock (and every timestamp after it) steps
// by step once its second run starts.
type stepClock struct {
	protocol.Backend
	step    time.Duration
	starts  atomic.Int32
	stepped atomic.Bool
}

func (s *stepClock) Now() time.Duration {
	if s.stepped.Load() {
		return s.Backend.Now() + s.step
	}
	return s.Backend.Now()
}

func (s *stepClock) Start(ctx context.Context, req protocol.StartRequest) error {
	if s.starts.Add(1) == 2 {
		s.stepped.Store(true)
	}
	return s.Backend.Start(ctx, req)
}

func (s *stepClock) Open(ctx context.Context, sink protocol.Sink) error {
	return s.Backend.Open(ctx, filteredSink{Sink: sink, edit: func(_ string, ev *protocol.Event) bool {
		if s.stepped.Load() {
			ev.At += int64(s.step)
		}
		return true
	}})
}

// lateEnd reports a run over before its run_completed event is in the
// timeline.
type lateEnd struct{ protocol.Backend }

type lateSink struct{ protocol.Sink }

func (s lateSink) Event(run string, ev protocol.Event) {
	if ev.Kind == protocol.EventRunCompleted {
		go func() {
			time.Sleep(50 * time.Millisecond)
			s.Sink.Event(run, ev)
		}()
		return
	}
	s.Sink.Event(run, ev)
}

func (l lateEnd) Open(ctx context.Context, sink protocol.Sink) error {
	return l.Backend.Open(ctx, lateSink{sink})
}

// resumes records a hook_received for every resume (no dedupe per run),
// or drops every resume id it saw before, whatever the run (dedupe across
// runs).
type resumes struct {
	protocol.Backend
	engineWide bool
	sink       protocol.Sink
	mu         sync.Mutex
	seen       map[string]bool
}

func (r *resumes) Open(ctx context.Context, sink protocol.Sink) error {
	r.sink = sink
	return r.Backend.Open(ctx, sink)
}

func (r *resumes) Resume(ctx context.Context, run, token string, req protocol.ResumeRequest) error {
	if r.engineWide {
		r.mu.Lock()
		dup := r.seen[req.ResumeID]
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[req.ResumeID] = true
		r.mu.Unlock()
		if dup {
			return nil
		}
	} else {
		r.sink.Event(run, protocol.Event{Kind: protocol.EventHookReceived, At: int64(r.Now()), Token: token, Source: protocol.SourceHistory})
	}
	return r.Backend.Resume(ctx, run, token, req)
}

// spanAfterEnd sends a span event after each run's terminal event (before
// the run's status is over).
type spanAfterEnd struct{ protocol.Backend }

type spanAfterEndSink struct{ protocol.Sink }

func (s spanAfterEndSink) Event(run string, ev protocol.Event) {
	s.Sink.Event(run, ev)
	if ev.Kind == protocol.EventRunCompleted {
		s.Sink.Event(run, protocol.Event{Kind: protocol.EventSpan, At: ev.At, End: ev.At, Category: "compute", Name: "cleanup",
			Source: protocol.SourceSDK})
	}
}

func (b spanAfterEnd) Open(ctx context.Context, sink protocol.Sink) error {
	return b.Backend.Open(ctx, spanAfterEndSink{sink})
}

// editSpans is the reference with every span event of category cat
// changed by edit.
func editSpans(cat string, edit func(ev *protocol.Event)) func(protocol.Backend) protocol.Backend {
	return func(b protocol.Backend) protocol.Backend {
		return &sinkFilter{Backend: b, edit: func(_ string, ev *protocol.Event) bool {
			if ev.Kind == protocol.EventSpan && ev.Category == cat {
				edit(ev)
			}
			return true
		}}
	}
}

// declareMinor makes a target declare protocol 1.minor in its info.
func declareMinor(minor int) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/info" {
				h.ServeHTTP(w, r)
				return
			}
			rewrite(h, w, r, func(m map[string]any) { m["minor"] = minor })
		})
	}
}

// minor11 declares protocol 1.1 in a target's info.
var minor11 = declareMinor(1)

// TestCheckFaults: a target with one careless fault at a time fails the
// checker on that fault's own row, with a reason that says what is wrong —
// never a raw transport error — and the rows it could not run are "n/a",
// not "pass". A broken span fails "span events" alone ("spans attribute"
// is then n/a: the spans are not walked).
func TestCheckFaults(t *testing.T) {
	nothing := func(h http.Handler) http.Handler { return h }
	for _, tc := range []struct {
		name      string
		scenarios []string
		backend   func(protocol.Backend) protocol.Backend
		wrap      func(http.Handler) http.Handler
		listener  func(net.Listener) net.Listener
		timeout   time.Duration
		check     string
		reason    string
		// alone: every other row passes or is n/a.
		alone bool
	}{
		{name: "a span of an unknown category", scenarios: []string{"step"}, alone: true,
			backend: editSpans("queue_wait", func(ev *protocol.Event) { ev.Category = "network" }),
			check:   "span events", reason: `category "network" is not one of durabench's critical-path categories`},
		{name: "a span that ends before it starts", scenarios: []string{"step"}, alone: true,
			backend: editSpans("start", func(ev *protocol.Event) { ev.End = ev.At - int64(time.Millisecond) }),
			check:   "span events", reason: "before at"},
		{name: "a span whose parent is no span of the run", scenarios: []string{"step"}, alone: true,
			backend: editSpans("queue_wait", func(ev *protocol.Event) { ev.Parent = 999999 }),
			check:   "span events", reason: "parent 999999 names no span of the run"},
		{name: "a span after the terminal event", scenarios: []string{"step"}, alone: true,
			backend: func(b protocol.Backend) protocol.Backend { return spanAfterEnd{b} },
			check:   "span events", reason: "after the terminal event"},
		{name: "spans from a 1.1 target", scenarios: []string{"step"}, alone: true, wrap: minor11,
			check: "span events", reason: `declares protocol 1.1: a target that sends spans declares "minor": 2`},
		{name: "nagle", scenarios: []string{"step"}, listener: func(l net.Listener) net.Listener { return nagleListener{l, 5 * time.Millisecond} },
			check: "clock bound", reason: "Nagle"},
		{name: "clock steps", scenarios: []string{"step"}, backend: func(b protocol.Backend) protocol.Backend {
			return &stepClock{Backend: b, step: 500 * time.Millisecond}
		}, check: "clock steady", reason: "ms against durabench's during the check"},
		{name: "status before the terminal event", scenarios: []string{"step"},
			backend: func(b protocol.Backend) protocol.Backend { return lateEnd{b} },
			check:   "status after terminal event", reason: "must not run ahead"},
		{name: "another run's id", scenarios: []string{"step"}, wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/timeline") {
					h.ServeHTTP(w, r)
					return
				}
				rewrite(h, w, r, func(m map[string]any) {
					if _, ok := m["run"]; ok {
						m["run"] = "someone-else"
					}
				})
			})
		}, check: "answers name the run", reason: `names run "someone-else"`},
		{name: "no 409", scenarios: []string{"step"}, wrap: func(h http.Handler) http.Handler {
			var mu sync.Mutex
			seen := map[string]bool{}
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" {
					var req protocol.StartRequest
					body, _ := readAll(r)
					_ = json.Unmarshal(body, &req)
					mu.Lock()
					dup := seen[req.Run]
					seen[req.Run] = true
					mu.Unlock()
					if dup {
						w.WriteHeader(http.StatusAccepted)
						_ = json.NewEncoder(w).Encode(protocol.StartReply{Run: req.Run})
						return
					}
					r.Body = nopCloser{bytes.NewReader(body)}
				}
				h.ServeHTTP(w, r)
			})
		}, check: "409 on a repeated run id", reason: "answer 409"},
		{name: "a 1.3 target that starts at once", scenarios: []string{"step"}, alone: true, wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" {
					var req map[string]any
					body, _ := readAll(r)
					if json.Unmarshal(body, &req) == nil {
						delete(req, "at") // started at once: the at never reaches the server
						body, _ = json.Marshal(req)
					}
					r.Body = nopCloser{bytes.NewReader(body)}
					r.ContentLength = int64(len(body))
				}
				h.ServeHTTP(w, r)
			})
		}, check: "starts held until at", reason: "before that: hold a start whose at is ahead until then"},
		{name: "no resume dedupe per run", scenarios: []string{"hook-step"},
			backend: func(b protocol.Backend) protocol.Backend { return &resumes{Backend: b} },
			check:   "resume id deduplicated per run", reason: "must be a no-op"},
		{name: "resume ids deduplicated engine-wide", scenarios: []string{"hook-step"}, timeout: 2 * time.Second,
			backend: func(b protocol.Backend) protocol.Backend { return &resumes{Backend: b, engineWide: true} },
			check:   "hooks resume", reason: "deduplicated per run, never across runs"},
		{name: "no long poll", scenarios: []string{"hook-step"}, wrap: noLongPoll,
			check: "long polls wait", reason: "came back empty"},
		{name: "batch polls answer another session's runs", scenarios: []string{"step"}, wrap: func(h http.Handler) http.Handler {
			// Every batch poll is answered as session "all" would be: every
			// run started is in it.
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/runs" || r.URL.Path == "/v1/timelines" {
					var m map[string]any
					if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
						t.Errorf("%s: %v", r.URL.Path, err)
					}
					if _, ok := m["session"]; ok {
						m["session"] = "all"
					}
					b, _ := json.Marshal(m)
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				h.ServeHTTP(w, r)
			})
		}, check: "batch polls", reason: "want only its own run"},
		{name: "a run that never ends", scenarios: []string{"step"}, timeout: time.Second,
			backend: func(b protocol.Backend) protocol.Backend {
				return &sinkFilter{Backend: b, noFinish: true, edit: func(_ string, ev *protocol.Event) bool { return ev.Kind != protocol.EventRunCompleted }}
			}, check: "completes", reason: "not finished after 1s (still running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b protocol.Backend = only{newRef(t), tc.scenarios}
			if tc.backend != nil {
				b = tc.backend(b)
			}
			wrap := tc.wrap
			if wrap == nil {
				wrap = nothing
			}
			srv, err := protocol.NewServer(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewUnstartedServer(wrap(srv))
			if tc.listener != nil {
				hs.Listener = tc.listener(hs.Listener)
			}
			hs.Start()
			t.Cleanup(func() {
				hs.Close()
				_ = srv.Close(context.Background())
			})
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			rep := checkURL(t, hs.URL, 2, timeout)
			var out strings.Builder
			_ = rep.Write(&out)
			if rep.Passed() {
				t.Fatalf("passes the checker:\n%s", out.String())
			}
			r := failed(rep, tc.check)
			if !strings.Contains(r, tc.reason) {
				t.Fatalf("%q fails with %q, want a reason with %q:\n%s", tc.check, r, tc.reason, out.String())
			}
			for _, res := range rep.Results {
				if tc.alone && res.Check != tc.check && !res.Pass && !res.NA {
					t.Errorf("%q fails too (%s):\n%s", res.Check, res.Reason, out.String())
				}
				if tc.check == "span events" && res.Check == "spans attribute" && !res.NA {
					t.Errorf("spans attribute of broken spans: %+v, want n/a", res)
				}
			}
			if strings.Contains(out.String(), "deadline exceeded") {
				t.Errorf("a raw transport error in the report:\n%s", out.String())
			}
		})
	}
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestCheckNA: checks that cannot run on a scenario say "n/a" with why,
// never "pass" (a scenario without a hook does not pass "hooks resume").
func TestCheckNA(t *testing.T) {
	rep := checkURL(t, serveBackend(t, only{newRef(t), []string{"step"}}), 1, 10*time.Second)
	if !rep.Passed() {
		var out strings.Builder
		_ = rep.Write(&out)
		t.Fatalf("the reference fails:\n%s", out.String())
	}
	for _, r := range rep.Results {
		if r.Check == "hooks resume" && (r.Pass || !r.NA || !strings.Contains(r.Reason, "no hook")) {
			t.Errorf("hooks resume on a scenario without a hook: %+v", r)
		}
		if (r.Check == "batch polls" || r.Check == "batch starts" || r.Check == "batch streams") && !r.Pass {
			t.Errorf("the reference's %s: %+v; want pass", r.Check, r)
		}
		if r.Check == "span events" && !r.Pass || r.Check == "spans attribute" && (!r.Pass || !strings.Contains(r.Reason, "of TTLS unattributed")) {
			t.Errorf("the reference's %s: %+v; want pass (with the unattributed share)", r.Check, r)
		}
	}
	// A target that sends no span: n/a, with why (a 1.2 target sent none;
	// a 1.1 target has none).
	for _, tc := range []struct {
		wrap   func(http.Handler) http.Handler
		reason string
	}{{func(h http.Handler) http.Handler { return h }, "the target sent no span event"}, {minor11, "span events are 1.2"}} {
		ref := newRef(t).(*reference.Reference)
		ref.NoSpans = true
		rep := checkURL(t, serveHandler(t, only{ref, []string{"step"}}, tc.wrap), 1, 10*time.Second)
		if !rep.Passed() {
			t.Errorf("a target without spans fails")
		}
		for _, r := range rep.Results {
			if (r.Check == "span events" || r.Check == "spans attribute") && (r.Pass || !r.NA || !strings.Contains(r.Reason, tc.reason)) {
				t.Errorf("%s of a target without spans: %+v; want n/a: %s", r.Check, r, tc.reason)
			}
		}
	}
	// A target that declares no batch endpoint: its check is n/a.
	url := serveHandler(t, only{newRef(t), []string{"step"}}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/info" {
				h.ServeHTTP(w, r)
				return
			}
			rewrite(h, w, r, func(m map[string]any) { delete(m, "batch") })
		})
	})
	rep = checkURL(t, url, 1, 10*time.Second)
	if !rep.Passed() {
		t.Fatalf("the reference without batch fails")
	}
	for _, r := range rep.Results {
		if (r.Check == "batch polls" || r.Check == "batch starts" || r.Check == "batch streams") && (r.Pass || !r.NA || !strings.Contains(r.Reason, "no batch")) {
			t.Errorf("%s of a target that declares no batch: %+v; want n/a", r.Check, r)
		}
	}
	// A target that declares batch 1 (polls, no batch starts): polls pass,
	// starts are n/a, and a session's cell runs with batch polls and a
	// start request per run.
	url = serveHandler(t, only{newRef(t), []string{"step"}}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/starts" || strings.HasSuffix(r.URL.Path, "/stream") {
				t.Errorf("%s to a target that declares batch 1", r.URL.Path)
			}
			if r.URL.Path != "/v1/info" {
				h.ServeHTTP(w, r)
				return
			}
			rewrite(h, w, r, func(m map[string]any) { m["batch"] = 1 })
		})
	})
	rep = checkURL(t, url, 1, 10*time.Second)
	for _, r := range rep.Results {
		if r.Check == "batch polls" && !r.Pass || (r.Check == "batch starts" || r.Check == "batch streams") && (r.Pass || !r.NA) {
			t.Errorf("%s of a target that declares batch 1: %+v", r.Check, r)
		}
	}
	res, err := runCellMode(t, url, "b1", "step", nil, 5, "stream")
	if err != nil || len(res.Timelines) != 5 {
		t.Fatalf("a cell on a batch 1 target: %v", err)
	}
	for _, tl := range res.Timelines {
		if !tl.Finished || tl.Failed {
			t.Errorf("run %s on a batch 1 target: finished %v failed %v (%s)", tl.ID, tl.Finished, tl.Failed, tl.Error)
		}
	}
}

// noLongPoll wraps a target's handler so that every timeline poll, and
// every batch poll, is answered at once (wait=0), as a target without
// long polls does.
func noLongPoll(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/timeline") {
			q := r.URL.Query()
			q.Set("wait", "0")
			r.URL.RawQuery = q.Encode()
		}
		if r.URL.Path == "/v1/timelines" {
			var req protocol.BatchRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err == nil {
				req.Wait = "0"
			}
			b, _ := json.Marshal(req)
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	})
}

// TestSessionBacksOffEarlyEmptyPolls: a target that answers every poll at
// once, empty, while a 300 ms step body runs (no long poll) is polled a
// handful of times, not thousands: the session backs off and counts the
// early empty polls, and the run is still measured — with per-run polls
// and with batch polls.
func TestSessionBacksOffEarlyEmptyPolls(t *testing.T) {
	for _, perRun := range []bool{true, false} {
		name := map[bool]string{true: "per-run", false: "batch"}[perRun]
		t.Run(name, func(t *testing.T) { testBackOff(t, perRun) })
	}
}

func testBackOff(t *testing.T, perRun bool) {
	url := serveHandler(t, only{newRef(t), []string{"step"}}, noLongPoll)
	c := client(t, url, map[bool]string{true: "per-run", false: "batch"}[perRun])
	local := mem.New(world.Options{})
	defer local.Close()
	opts := map[string]string{"body": "300ms"}
	sess, err := target.NewSession(context.Background(), c, "step", opts, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	if sess.Batched() == perRun {
		t.Fatalf("batched %v; want %v (the reference declares batch 3, used up to 2)", sess.Batched(), !perRun)
	}
	obs := &finished{done: make(chan struct{})}
	detach, err := sess.Attach(context.Background(), obs, func(run string, _ time.Duration, err error) { t.Errorf("%s failed: %v", run, err) })
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.StartRun(context.Background(), "slow", engine.Sequence(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-obs.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not finish")
	}
	detach()
	ps := sess.Polls()
	if ps.EarlyEmpty < 2 || ps.Polls > 20 {
		t.Fatalf("%d polls, %d early and empty, for one 300 ms run; want a few early ones and a back-off", ps.Polls, ps.EarlyEmpty)
	}
	if cw := sess.ClockWatch(); cw.Rounds < 2 {
		t.Errorf("the clock was sampled %d times; want at the cell's start and end", cw.Rounds)
	}
}

// finished is an observer that closes done when a run finishes.
type finished struct {
	done chan struct{}
	once sync.Once
}

func (f *finished) StepBody(string, engine.StepSpan)          {}
func (f *finished) HookCreated(string, string, time.Duration) {}
func (f *finished) StreamChunk(string, engine.ChunkSpan)      {}
func (f *finished) RunFinished(string, time.Duration, bool)   { f.once.Do(func() { close(f.done) }) }

// TestCheckStreamNotServed: a target that declares batch 3 but does not
// serve session streams (a careless adapter) fails "batch streams" with
// what it answered, and a cell on it fails every run with that message —
// counted, never a hang.
func TestCheckStreamNotServed(t *testing.T) {
	url := serveHandler(t, only{newRef(t), []string{"step"}}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/stream") {
				http.Error(w, `{"error": "no such endpoint"}`, http.StatusNotFound)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	rep := checkURL(t, url, 1, 10*time.Second)
	if why := failed(rep, "batch streams"); !strings.Contains(why, "404") {
		t.Errorf("batch streams of a target without them: %q, want a failure naming the 404", why)
	}
	res, err := runCellMode(t, url, "nostream", "step", nil, 5, "stream")
	if !errors.Is(err, driver.ErrStart) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a cell on a target that declares streams and serves none: %v, want every run failed with the 404", err)
	}
	if res == nil || len(res.Timelines) != 5 {
		t.Fatalf("%v: want the 5 runs counted", res)
	}
}

// slowStatus reports each run's status 50 ms after its terminal event: a
// session stream then writes the event in a line whose status still reads
// running, and the status in a later line.
type slowStatus struct{ protocol.Backend }

type slowStatusSink struct{ protocol.Sink }

func (s slowStatusSink) Finished(run string, failed bool, msg string) {
	time.Sleep(50 * time.Millisecond)
	s.Sink.Finished(run, failed, msg)
}

func (b slowStatus) Open(ctx context.Context, sink protocol.Sink) error {
	return b.Backend.Open(ctx, slowStatusSink{sink})
}

// TestCheckStatusAfterItsEvent: a target whose terminal status comes in a
// line after its terminal event keeps to the protocol (the status never
// runs ahead of the event) and passes the checker, its batch streams
// included.
func TestCheckStatusAfterItsEvent(t *testing.T) {
	url := serveHandler(t, slowStatus{only{newRef(t), []string{"step"}}}, func(h http.Handler) http.Handler { return h })
	rep := checkURL(t, url, 2, 10*time.Second)
	var out strings.Builder
	_ = rep.Write(&out)
	if !rep.Passed() {
		t.Fatalf("fails the checker:\n%s", out.String())
	}
	for _, res := range rep.Results {
		if res.Check == "batch streams" && !res.Pass {
			t.Fatalf("batch streams %+v, want a pass:\n%s", res, out.String())
		}
	}
}
