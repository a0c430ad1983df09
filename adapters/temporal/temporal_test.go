package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/check"
	"github.com/durabench/durabench/protocol"
)

// fanoutSizes are the fan-outs TestExternalServer runs (-fanout 256,1024
// checks a larger limit).
var fanoutSizes = sizesFlag{256}

type sizesFlag []int

func (f *sizesFlag) String() string { return fmt.Sprint(*f) }
func (f *sizesFlag) Set(s string) error {
	*f = nil
	for _, p := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(p, &n); err != nil {
			return err
		}
		*f = append(*f, n)
	}
	return nil
}

func init() { flag.Var(&fanoutSizes, "fanout", "fan-out sizes of TestExternalServer") }

// exe is the adapter executable, built once by TestMain (go build, as make
// engines builds it).
var exe string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "durabench-target-temporal-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exe = filepath.Join(dir, protocol.ExecutablePrefix+"temporal")
	start := time.Now()
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the adapter:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "built %s in %v\n", exe, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// checkPasses runs durabench's conformance checker against url.
func checkPasses(t *testing.T, url string) {
	t.Helper()
	c, err := target.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := check.Run(ctx, c, check.Options{RunTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = rep.Write(&out)
	t.Logf("target check %s:\n%s", url, out.String())
	if !rep.Passed() {
		t.Fatalf("target check failed")
	}
	spansChecked(t, rep)
	if len(rep.Info.Scenarios) != 4 {
		t.Errorf("scenarios %v, want fanout, sequential, hook-step, step", rep.Info.Scenarios)
	}
}

// runToEnd starts a run, asking for its spans, and follows its timeline to
// the end, resuming its hooks; it returns every event.
func runToEnd(t *testing.T, c *target.Client, run, scenario string, opts map[string]string) []protocol.Event {
	t.Helper()
	return runToEndSpans(t, c, run, scenario, opts, true)
}

// runToEndSpans is runToEnd, asking for the run's spans or not.
func runToEndSpans(t *testing.T, c *target.Client, run, scenario string, opts map[string]string, spans bool) []protocol.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Start(ctx, protocol.StartRequest{Run: run, Scenario: scenario, Options: opts, Spans: spans}); err != nil {
		t.Fatalf("start %s: %v", run, err)
	}
	var evs []protocol.Event
	var after int64
	for {
		tl, err := c.Timeline(ctx, run, after, 5*time.Second)
		if err != nil {
			t.Fatalf("timeline %s: %v", run, err)
		}
		for _, ev := range tl.Events {
			after = ev.Seq
			evs = append(evs, ev)
			if ev.Kind == protocol.EventHookWaiting {
				if err := c.Resume(ctx, run, ev.Token, protocol.ResumeRequest{ResumeID: "r/" + ev.Token}); err != nil {
					t.Fatalf("resume: %v", err)
				}
			}
		}
		if tl.Terminal() {
			if tl.Status != protocol.StatusCompleted {
				t.Fatalf("run %s %s: %s", run, tl.Status, tl.Error)
			}
			return evs
		}
	}
}

// fanoutOnce runs a fan-out of n branches and checks every branch started
// and completed exactly once, with the sources the README names.
func fanoutOnce(t *testing.T, c *target.Client, run string, n int) time.Duration {
	t.Helper()
	begin := time.Now()
	evs := runToEnd(t, c, run, "fanout", map[string]string{"branches": fmt.Sprint(n)})
	took := time.Since(begin)
	started, done := make([]int, n), make([]int, n)
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		switch ev.Kind {
		case protocol.EventStepStarted, protocol.EventStepCompleted:
			if ev.Stage != 0 || ev.Index < 0 || ev.Index >= n || ev.Source != protocol.SourceSDK || ev.Attempt < 1 {
				t.Fatalf("bad step event %+v", ev)
			}
			if ev.Kind == protocol.EventStepStarted {
				started[ev.Index]++
			} else {
				done[ev.Index]++
			}
		}
	}
	if evs[0].Kind != protocol.EventRunStarted || evs[len(evs)-1].Kind != protocol.EventRunCompleted {
		t.Errorf("first event %s, last %s", evs[0].Kind, evs[len(evs)-1].Kind)
	}
	for i := range n {
		if started[i] < 1 || done[i] != 1 {
			t.Errorf("branch %d: %d starts, %d completions", i, started[i], done[i])
		}
	}
	return took
}

// TestBackend serves the backend in this process (with its in-process
// Temporal server) and runs the checker and the protocol's edge cases.
func TestBackend(t *testing.T) {
	ctx := context.Background()
	b := NewBackend(DefaultConfig())
	srv, err := protocol.NewServer(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	checkPasses(t, hs.URL)
	c, _ := target.NewClient(hs.URL)

	t.Run("unsupported", func(t *testing.T) {
		for _, req := range []protocol.StartRequest{
			{Run: "u1", Scenario: "stream"},
			{Run: "u2", Scenario: "nope"},
			{Run: "u3", Scenario: "fanout", Options: map[string]string{"colour": "red"}},
			{Run: "u4", Scenario: "fanout", Options: map[string]string{"branches": "x"}},
			{Run: "u5", Scenario: "fanout", Options: map[string]string{"branches": "100000"}},
		} {
			_, err := c.Start(ctx, req)
			if err == nil || !strings.Contains(err.Error(), "422") {
				t.Errorf("%+v: %v, want 422", req, err)
			}
		}
	})
	t.Run("hook resume is idempotent", func(t *testing.T) {
		run := "hook-dup"
		if _, err := c.Start(ctx, protocol.StartRequest{Run: run, Scenario: "hook-step", Options: map[string]string{"body": "1ms"}}); err != nil {
			t.Fatal(err)
		}
		var after int64
		var evs []protocol.Event
		resumed := 0
		for {
			tl, err := c.Timeline(ctx, run, after, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range tl.Events {
				after = ev.Seq
				evs = append(evs, ev)
				if ev.Kind == protocol.EventHookWaiting {
					for range 3 {
						if err := c.Resume(ctx, run, ev.Token, protocol.ResumeRequest{ResumeID: "same", Payload: []byte("ok")}); err != nil {
							t.Fatal(err)
						}
						resumed++
					}
				}
			}
			if tl.Terminal() {
				break
			}
		}
		if resumed != 3 {
			t.Fatalf("resumed %d times", resumed)
		}
		// After the end, the same resume id is still a no-op.
		if err := c.Resume(ctx, run, "hook-"+run, protocol.ResumeRequest{ResumeID: "same"}); err != nil {
			t.Errorf("repeat resume after the end: %v", err)
		}
		kinds := []string{}
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind)
		}
		want := "run_started hook_waiting hook_received step_started step_completed run_completed"
		if got := strings.Join(kinds, " "); got != want {
			t.Errorf("events %s, want %s", got, want)
		}
		if evs[3].Stage != 1 || evs[4].Stage != 1 || evs[4].At-evs[3].At < int64(time.Millisecond) {
			t.Errorf("step events %+v %+v", evs[3], evs[4])
		}
	})
	t.Run("sequential", func(t *testing.T) {
		evs := runToEnd(t, c, "seq-20", "sequential", map[string]string{"steps": "20"})
		var stages []int
		for _, ev := range evs {
			if ev.Kind == protocol.EventStepCompleted {
				stages = append(stages, ev.Stage)
			}
		}
		for i, s := range stages {
			if s != i {
				t.Fatalf("completed stages %v", stages)
			}
		}
		if len(stages) != 20 {
			t.Fatalf("completed stages %v", stages)
		}
	})
}

// startDevServerProcess starts "durabench-target-temporal dev-server" (a
// Temporal server in a process of its own) and returns its host:port.
func startDevServerProcess(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(exe, "dev-server")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
		}
	}()
	var addr string
	select {
	case addr = <-lines:
	case <-time.After(time.Minute):
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev-server exit: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("dev-server did not stop on SIGTERM")
		}
	})
	if !strings.Contains(addr, ":") {
		t.Fatalf("dev-server printed %q, not host:port", addr)
	}
	return addr
}

func launch(t *testing.T, args ...string) *target.Plugin {
	t.Helper()
	var mu sync.Mutex
	var log strings.Builder
	p, err := target.Launch(context.Background(), "temporal", exe, args, writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(b)
	}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestExecutable drives the built adapter through target.Launch: it prints
// its URL, runs a step on its own in-process server, and exits 0 on SIGTERM.
func TestExecutable(t *testing.T) {
	p := launch(t)
	c, err := target.NewClient(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil || info.Engine != "temporal" || !strings.Contains(info.Version, "in-process") {
		t.Fatalf("info %+v, %v", info, err)
	}
	runToEnd(t, c, "exe-step", "step", nil)
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: adapter exit %v; log:\n%s", err, p.Log())
	}
}

// TestExternalServer runs a Temporal server in a process of its own and the
// adapter against it with --temporal-address: the checker passes through
// it, and a 256-branch fan-out runs every step exactly once.
func TestExternalServer(t *testing.T) {
	addr := startDevServerProcess(t)
	p := launch(t, "--temporal-address", addr, "--namespace", "default")
	defer func() {
		if err := p.Stop(); err != nil {
			t.Errorf("SIGTERM: adapter exit %v; log:\n%s", err, p.Log())
		}
	}()
	c, _ := target.NewClient(p.URL)
	info, err := c.Info(context.Background())
	if err != nil || !strings.Contains(info.Version, "external") {
		t.Fatalf("info %+v, %v", info, err)
	}
	checkPasses(t, p.URL)
	for i, n := range fanoutSizes {
		took := fanoutOnce(t, c, fmt.Sprintf("ext-fanout-%d-%d", n, i), n)
		t.Logf("fanout %d branches through the external server: %v (start to terminal timeline)", n, took)
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
