package main

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/check"
	"github.com/durabench/durabench/protocol"
)

// serve runs the adapter in-process (the real go-workflows worker on the
// real sqlite backend) behind protocol.NewServer over loopback HTTP.
func serve(t testing.TB, cfg Config) (*target.Client, *Adapter) {
	t.Helper()
	a := New(cfg)
	srv, err := protocol.NewServer(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	c, err := target.NewClient(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

// TestCheck: durabench's conformance checker passes for every scenario the
// adapter declares, on an in-memory database and on a file.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(Config) Config
	}{
		{"memory", func(c Config) Config { return c }},
		{"file", func(c Config) Config { c.SQLite = filepath.Join(t.TempDir(), "gw.sqlite"); return c }},
		{"polling", func(c Config) Config { c.Monoprocess = false; c.PollInterval = 5 * time.Millisecond; return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := serve(t, tc.cfg(DefaultConfig()))
			rep, err := check.Run(context.Background(), c, check.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			_ = rep.Write(&out)
			if !rep.Passed() {
				t.Fatalf("check failed:\n%s", out.String())
			}
			spansChecked(t, rep)
			want := map[string]bool{"fanout": true, "sequential": true, "hook-step": true, "step": true}
			for _, r := range rep.Results {
				delete(want, r.Scenario)
			}
			if len(want) > 0 {
				t.Errorf("scenarios not checked: %v\n%s", want, out.String())
			}
			t.Logf("\n%s", out.String())
		})
	}
}

// followTimeout bounds a run in follow.
var followTimeout = 60 * time.Second

// follow polls run's timeline to its end and returns its events.
func follow(t testing.TB, c *target.Client, run string, resume bool) (protocol.Timeline, []protocol.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), followTimeout)
	defer cancel()
	var evs []protocol.Event
	var after int64
	for {
		tl, err := c.Timeline(ctx, run, after, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		for _, ev := range tl.Events {
			after = ev.Seq
			evs = append(evs, ev)
			if resume && ev.Kind == protocol.EventHookWaiting {
				for range 2 { // the second resume with the same id is a no-op
					if err := c.Resume(ctx, run, ev.Token, protocol.ResumeRequest{ResumeID: "r/" + ev.Token, Payload: []byte("ok")}); err != nil {
						t.Fatalf("%s: resume: %v", run, err)
					}
				}
			}
		}
		if tl.Terminal() {
			return tl, evs
		}
	}
}

// TestFanout256: a 256-branch fan-out completes with every step started
// and completed exactly once, stage 0, indexes 0..255.
func TestFanout256(t *testing.T) {
	c, _ := serve(t, DefaultConfig())
	const n = 256
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "f256", Scenario: "fanout",
		Options: map[string]string{"branches": fmt.Sprint(n)}}); err != nil {
		t.Fatal(err)
	}
	tl, evs := follow(t, c, "f256", false)
	if tl.Status != protocol.StatusCompleted {
		t.Fatalf("status %s: %s", tl.Status, tl.Error)
	}
	started, completed := map[int]int{}, map[int]int{}
	var first, last int64
	for _, ev := range evs {
		switch ev.Kind {
		case protocol.EventStepStarted, protocol.EventStepCompleted:
			if ev.Stage != 0 || ev.Index < 0 || ev.Index >= n || ev.Attempt != 1 || ev.Source != protocol.SourceWorker {
				t.Fatalf("bad step event %+v", ev)
			}
			if ev.Kind == protocol.EventStepStarted {
				started[ev.Index]++
			} else {
				completed[ev.Index]++
			}
		case protocol.EventRunStarted:
			first = ev.At
		case protocol.EventRunCompleted:
			last = ev.At
		}
	}
	for i := range n {
		if started[i] != 1 || completed[i] != 1 {
			t.Errorf("step 0.%d: started %d times, completed %d times", i, started[i], completed[i])
		}
	}
	if evs[0].Kind != protocol.EventRunStarted || evs[len(evs)-1].Kind != protocol.EventRunCompleted {
		t.Errorf("first event %s, last %s", evs[0].Kind, evs[len(evs)-1].Kind)
	}
	t.Logf("256 branches: run_started -> run_completed %v", time.Duration(last-first))
}

// TestHookStep: the hook is reported, resumed twice with one resume id
// (one signal), received, and the step runs after it.
func TestHookStep(t *testing.T) {
	c, _ := serve(t, DefaultConfig())
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "h1", Scenario: "hook-step"}); err != nil {
		t.Fatal(err)
	}
	tl, evs := follow(t, c, "h1", true)
	if tl.Status != protocol.StatusCompleted {
		t.Fatalf("status %s: %s", tl.Status, tl.Error)
	}
	var kinds []string
	for _, ev := range evs {
		k := ev.Kind
		if ev.Kind == protocol.EventStepStarted || ev.Kind == protocol.EventStepCompleted {
			k = fmt.Sprintf("%s %d.%d", ev.Kind, ev.Stage, ev.Index)
		}
		kinds = append(kinds, k)
	}
	want := "run_started hook_waiting hook_received step_started 1.0 step_completed 1.0 run_completed"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	// After the run, the same resume id is still a no-op; a new one is an
	// error (the run is over).
	tok := evs[1].Token
	if err := c.Resume(context.Background(), "h1", tok, protocol.ResumeRequest{ResumeID: "r/" + tok}); err != nil {
		t.Errorf("repeated resume after the run: %v", err)
	}
	if err := c.Resume(context.Background(), "h1", tok, protocol.ResumeRequest{ResumeID: "other"}); err == nil {
		t.Errorf("a new resume of a finished run succeeded")
	}
}

// TestUnsupported: unknown scenarios and options, and cells over the
// declared limits, are 422s.
func TestUnsupported(t *testing.T) {
	c, _ := serve(t, DefaultConfig())
	for i, req := range []protocol.StartRequest{
		{Scenario: "stream"},
		{Scenario: "nope"},
		{Scenario: "fanout", Options: map[string]string{"width": "3"}},
		{Scenario: "fanout", Options: map[string]string{"branches": "x"}},
		{Scenario: "fanout", Options: map[string]string{"branches": "1000000"}},
		{Scenario: "sequential", Options: map[string]string{"steps": "1000000"}},
	} {
		req.Run = fmt.Sprintf("u%d", i)
		_, err := c.Start(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "422") {
			t.Errorf("%+v: %v, want a 422", req, err)
		}
	}
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "ok", Scenario: "step",
		Options: map[string]string{"body": "2ms"}}); err != nil {
		t.Fatal(err)
	}
	if tl, _ := follow(t, c, "ok", false); tl.Status != protocol.StatusCompleted {
		t.Fatalf("step: %s %s", tl.Status, tl.Error)
	}
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "ok", Scenario: "step"}); err == nil ||
		!strings.Contains(err.Error(), "409") {
		t.Errorf("a second start of run ok: %v, want a 409", err)
	}
}

// TestExecutable builds the adapter and drives it as durabench does: it
// prints its URL, serves, and on SIGTERM exits 0 and removes the sqlite
// file it created.
func TestExecutable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the executable")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, protocol.ExecutablePrefix+"goworkflows")
	build := exec.Command("go", "build", "-o", exe, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "data", "gw.sqlite")
	if err := os.Mkdir(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := target.Launch(context.Background(), "goworkflows", exe, []string{"--sqlite", db}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if !strings.HasPrefix(p.URL, "http://127.0.0.1:") {
		t.Fatalf("URL %q", p.URL)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the database file: %v", err)
	}
	c, err := target.NewClient(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil || info.Engine != "go-workflows" {
		t.Fatalf("info %+v, %v", info, err)
	}
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "x1", Scenario: "fanout",
		Options: map[string]string{"branches": "16"}}); err != nil {
		t.Fatal(err)
	}
	if tl, _ := follow(t, c, "x1", false); tl.Status != protocol.StatusCompleted {
		t.Fatalf("fanout: %s %s", tl.Status, tl.Error)
	}
	if err := p.Stop(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("exit %d after SIGTERM; log:\n%s", ee.ExitCode(), p.Log())
		}
		t.Fatal(err)
	}
	if strings.Contains(p.Log(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", p.Log())
	}
	left, _ := os.ReadDir(filepath.Dir(db))
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// spansChecked asserts that the checker validated span events (protocol
// 1.2) for every scenario: the "span events" row passed, not n/a.
func spansChecked(t *testing.T, rep check.Report) {
	t.Helper()
	n := 0
	for _, r := range rep.Results {
		if r.Check == "span events" {
			n++
			if !r.Pass {
				t.Errorf("%s: span events %s", r.Scenario, r.Reason)
			}
		}
	}
	if n == 0 || rep.Info.Minor < protocol.MinorSpans {
		t.Errorf("the checker checked no span events (protocol %s)", rep.Info.ProtocolString())
	}
}
