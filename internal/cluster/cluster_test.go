package cluster_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world/nats/natstest"
)

// The tests run the real durabench binary (driver and workers, each its
// own process) against nats-server processes on loopback: what is under
// test is processes that share nothing but the NATS cluster.

// bin is the durabench binary, built once.
var bin string

func TestMain(m *testing.M) {
	natstest.Main()
	if slices.ContainsFunc(os.Args, func(a string) bool { return strings.HasPrefix(a, "-test.fuzzworker") }) {
		os.Exit(m.Run()) // a fuzzing worker process runs fuzz targets only: no binary
	}
	dir, err := os.MkdirTemp("", "durabench-cluster-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "durabench")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/durabench").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startServer starts one nats-server process and returns its URL.
func startServer(t *testing.T, spec natstest.Spec) string {
	t.Helper()
	return natstest.Start(t, spec).URL
}

// syncBuffer is a bytes.Buffer safe for a process writer and a test reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerProc is a `durabench worker` process.
type workerProc struct {
	id   string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error
}

// startWorker starts a worker and waits until it is ready; the test's
// cleanup stops it with SIGTERM.
func startWorker(t *testing.T, url, id string, extra ...string) *workerProc {
	t.Helper()
	args := append([]string{"worker", "--nats-url", url, "--id", id, "--status-every", "2s"}, extra...)
	w := &workerProc{id: id, cmd: exec.Command(bin, args...), log: &syncBuffer{}, done: make(chan struct{})}
	w.cmd.Stderr = w.log
	w.cmd.Stdout = w.log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("worker %s log:\n%s", id, w.log.String())
		}
	})
	w.waitLog(t, "ready on", 20*time.Second)
	return w
}

// waitLog waits until the worker's log contains s.
func (w *workerProc) waitLog(t *testing.T, s string, limit time.Duration) {
	t.Helper()
	w.waitLogMatch(t, regexp.MustCompile(regexp.QuoteMeta(s)), limit)
}

// waitLogMatch waits until the worker's log matches re.
func (w *workerProc) waitLogMatch(t *testing.T, re *regexp.Regexp, limit time.Duration) {
	t.Helper()
	s := re.String()
	end := time.Now().Add(limit)
	for !re.MatchString(w.log.String()) {
		select {
		case <-w.done:
			t.Fatalf("worker %s exited (%v) before %q; log:\n%s", w.id, w.err, s, w.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("worker %s: no %q within %v; log:\n%s", w.id, s, limit, w.log.String())
		}
	}
}

// sweepProc is a driver: `durabench sweep --workers external`.
type sweepProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
	out            string
}

func startSweep(t *testing.T, url string, args ...string) *sweepProc {
	t.Helper()
	return startSweepIn(t, "", url, args...)
}

// startSweepIn starts the driver in working directory dir ("" for the
// test's).
func startSweepIn(t *testing.T, dir, url string, args ...string) *sweepProc {
	t.Helper()
	return startSweepOn(t, dir, []string{"--world", "nats", "--nats-url", url}, args...)
}

// startSweepOn starts the driver in working directory dir on the world
// (and meeting point) the flags in on name.
func startSweepOn(t *testing.T, dir string, on []string, args ...string) *sweepProc {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	all := append(append(append([]string{"sweep"}, on...), "--workers", "external",
		"--scenario", "fanout", "--progress", "lines", "--out", out), args...)
	s := &sweepProc{cmd: exec.Command(bin, all...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{}), out: out}
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.code = ee.ExitCode()
		} else if err != nil {
			s.code = -1
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

func (s *sweepProc) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("sweep did not finish within %v; stdout:\n%s\nstderr:\n%s", limit, s.stdout, s.stderr)
	}
}

func (s *sweepProc) results(t *testing.T) *results.File {
	t.Helper()
	f, err := results.Read(filepath.Join(s.out, "results.json"))
	if err != nil {
		t.Fatalf("results: %v; stdout:\n%s\nstderr:\n%s", err, s.stdout, s.stderr)
	}
	return f
}

const branches = 64

// checkCell checks that the cell's runs all completed, every branch's step
// body was recorded, and every worker took part.
func checkCell(t *testing.T, c results.Cell, reps int, workers ...string) {
	t.Helper()
	if c.Runs != reps || c.Errors != 0 || c.Stalls != 0 {
		t.Errorf("cell: runs %d errors %d stalls %d (%v %v), want %d runs, no errors, no stalls",
			c.Runs, c.Errors, c.Stalls, c.FailedRuns, c.StalledRuns, reps)
	}
	if got := c.Metrics["ttls"].Count; got != reps {
		t.Errorf("ttls has %d samples, want %d", got, reps)
	}
	// skew_offset has one sample per branch of each finished run: every
	// step body's record reached the driver.
	if got := c.Metrics["skew_offset"].Count; got != reps*branches {
		t.Errorf("skew_offset has %d samples, want %d (every step body of every run)", got, reps*branches)
	}
	if !slices.Equal(c.Workers, workers) {
		t.Errorf("workers %v, want %v", c.Workers, workers)
	}
	if len(c.WorkerStats) != len(workers) {
		t.Fatalf("worker stats %+v", c.WorkerStats)
	}
	for _, ws := range c.WorkerStats {
		drift := "?"
		if ws.DriftUS != nil {
			drift = fmt.Sprintf("%.0f", *ws.DriftUS)
		}
		t.Logf("worker %s: offset %.0f µs, rtt %.0f µs, drift %s µs, %d deliveries, %d redeliveries, %d step bodies, lost %v",
			ws.Worker, ws.OffsetUS, ws.RTTUS, drift, ws.Deliveries, ws.Redeliveries, ws.Steps, ws.Lost)
		if ws.RTTUS <= 0 || ws.DriftUS == nil {
			t.Errorf("worker %s: rtt %v µs", ws.Worker, ws.RTTUS)
		}
	}
	t.Logf("ttls p50 %d µs, max %d µs; negatives (skew) ttfs %d", c.Metrics["ttls"].P50, c.Metrics["ttls"].Max, c.Metrics["ttfs"].Negative)
}

// testTwoWorkers: two workers and a driver run a 64-branch fan-out; every
// step body runs and the results name both workers.
func testTwoWorkers(t *testing.T, url string, replicas int) {
	startWorker(t, url, "w1", "--concurrency", "16")
	startWorker(t, url, "w2", "--concurrency", "16")
	const reps = 4
	s := startSweep(t, url, "--expect-workers", "2", "--branches", fmt.Sprint(branches), "--versions", "pending-count",
		"--switches", "none", "--reps", fmt.Sprint(reps), "--warmup", "1", "--option", "body=2ms",
		"--nats-replicas", fmt.Sprint(replicas), "--cell-timeout", "60s")
	s.wait(t, 120*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	f := s.results(t)
	if len(f.Cells) != 1 {
		t.Fatalf("%d cells, want 1", len(f.Cells))
	}
	c := f.Cells[0]
	checkCell(t, c, reps, "w1", "w2")
	var steps int64
	for _, ws := range c.WorkerStats {
		steps += ws.Steps
		if ws.Steps == 0 || ws.Lost {
			t.Errorf("worker %s ran %d step bodies (lost %v): it did not take part", ws.Worker, ws.Steps, ws.Lost)
		}
	}
	if want := int64((reps + 1) * branches); steps < want {
		t.Errorf("workers ran %d step bodies, want at least %d", steps, want)
	}
	// Where the time went, from the workers' spans: every run's TTLS is
	// split along its critical path, most of it attributed.
	var sum, un float64
	for _, pc := range c.CriticalPath {
		if len(pc.Values) != reps {
			t.Fatalf("critical_path %s: %d values, want %d", pc.Category, len(pc.Values), reps)
		}
		sum += pc.Mean
		if pc.Category == "unattributed" {
			un = pc.Mean
		}
	}
	ttls := c.Metrics["ttls"]
	if len(c.CriticalPath) == 0 || math.Abs(sum-ttls.Mean) > 1 {
		t.Fatalf("critical_path means add up to %.0f µs, TTLS mean %.0f µs (%d categories)", sum, ttls.Mean, len(c.CriticalPath))
	}
	if un > 0.2*sum {
		t.Errorf("unattributed %.0f µs of %.0f µs: the workers' spans do not reach the driver", un, sum)
	}
	t.Logf("critical path: unattributed %.0f of %.0f µs", un, sum)
}

// testKillWorker: a worker killed with SIGKILL mid-cell leaves its
// un-acked messages to the other after the visibility timeout; the cell
// completes and counts the redeliveries.
func testKillWorker(t *testing.T, url string, replicas int) {
	testKillWorkerOn(t, url, []string{"--world", "nats", "--nats-url", url, "--nats-replicas", fmt.Sprint(replicas)})
}

// testKillWorkerOn is testKillWorker with workers on the NATS server at
// url and the driver's world flags on.
func testKillWorkerOn(t *testing.T, url string, on []string) {
	startWorker(t, url, "w1", "--concurrency", "4")
	victim := startWorker(t, url, "w2", "--concurrency", "4", "--status-every", "100ms")
	const reps = 8
	// No inline steps: the engine does not recover a run whose
	// orchestrator dies while it runs an inline step (the step exists, has
	// no queue message, and a replay of the redelivered workflow message
	// takes it for dispatched), so a kill that lands there stalls the run
	// whatever the workers do. Queued steps and their redeliveries are what
	// this test is about.
	file := filepath.Join(t.TempDir(), "no-inline.yaml")
	if err := os.WriteFile(file, []byte("custom_versions:\n  - name: no-inline\n    base: pending-count\n    features:\n      inline_steps: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSweepOn(t, "", on, "-f", file, "--expect-workers", "2", "--branches", fmt.Sprint(branches), "--versions", "no-inline",
		"--switches", "none", "--reps", fmt.Sprint(reps), "--warmup", "0", "--option", "body=50ms",
		"--visibility-timeout", "2s", "--cell-timeout", "90s")
	// Mid-cell: killed once its status shows deliveries in flight, the
	// victim holds messages (running and prefetched) that only a
	// redelivery brings back. (A fixed delay after the cell started was not
	// enough on a loaded machine: the other worker had taken every message
	// so far.)
	victim.waitLogMatch(t, regexp.MustCompile(`\([1-9][0-9]* in flight\)`), 60*time.Second)
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 150*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	f := s.results(t)
	if len(f.Cells) != 1 {
		t.Fatalf("%d cells, want 1", len(f.Cells))
	}
	c := f.Cells[0]
	if c.Runs != reps || c.Errors != 0 || c.Metrics["ttc"].Count != reps {
		t.Errorf("runs %d errors %d ttc samples %d: want %d completed runs", c.Runs, c.Errors, c.Metrics["ttc"].Count, reps)
	}
	if !slices.Equal(c.Workers, []string{"w1", "w2"}) {
		t.Errorf("workers %v, want both", c.Workers)
	}
	for _, ws := range c.WorkerStats {
		t.Logf("worker %s: offset %.0f µs, rtt %.0f µs, %d deliveries, %d redeliveries, %d step bodies, lost %v",
			ws.Worker, ws.OffsetUS, ws.RTTUS, ws.Deliveries, ws.Redeliveries, ws.Steps, ws.Lost)
		if ws.Worker == "w2" && !ws.Lost {
			t.Errorf("the killed worker is not reported lost")
		}
	}
	if c.Redeliveries < 1 {
		t.Errorf("redeliveries %d, want > 0 (the killed worker held messages)", c.Redeliveries)
	}
	t.Logf("ttls p50 %d µs, max %d µs; %d redeliveries", c.Metrics["ttls"].P50, c.Metrics["ttls"].Max, c.Redeliveries)
}

// testStopWorker: a worker stopped with SIGTERM mid-cell finishes what it
// runs and nak's what it holds, so the other worker takes over at once —
// no run waits for the visibility timeout — and it exits 0.
func testStopWorker(t *testing.T, url string, replicas int) {
	startWorker(t, url, "w1", "--concurrency", "4")
	leaver := startWorker(t, url, "w2", "--concurrency", "4")
	const reps = 6
	// A visibility timeout longer than the cell timeout: a message left to
	// it would make its run a stall.
	s := startSweep(t, url, "--expect-workers", "2", "--branches", fmt.Sprint(branches), "--versions", "pending-count",
		"--switches", "none", "--reps", fmt.Sprint(reps), "--warmup", "0", "--option", "body=50ms",
		"--visibility-timeout", "120s", "--nats-replicas", fmt.Sprint(replicas), "--cell-timeout", "60s")
	leaver.waitLog(t, "started", 60*time.Second)
	time.Sleep(time.Second)
	if err := leaver.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leaver.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not stop on SIGTERM; log:\n%s", leaver.log)
	}
	if leaver.err != nil || !strings.Contains(leaver.log.String(), "stopped cell") {
		t.Errorf("worker exit %v; log:\n%s", leaver.err, leaver.log)
	}
	s.wait(t, 120*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	c := s.results(t).Cells[0]
	if c.Runs != reps || c.Errors != 0 || c.Stalls != 0 || c.Metrics["ttc"].Count != reps {
		t.Errorf("runs %d errors %d stalls %d ttc samples %d: want %d completed runs", c.Runs, c.Errors, c.Stalls, c.Metrics["ttc"].Count, reps)
	}
	for _, ws := range c.WorkerStats {
		t.Logf("worker %s: %d deliveries, %d redeliveries, %d step bodies, lost %v, left %v",
			ws.Worker, ws.Deliveries, ws.Redeliveries, ws.Steps, ws.Lost, ws.Left)
		if ws.Worker == "w2" && (!ws.Left || ws.Steps == 0) {
			t.Errorf("the stopped worker: left %v with %d step bodies, want left with its counts", ws.Left, ws.Steps)
		}
	}
	t.Logf("ttls p50 %d µs, max %d µs; %d redeliveries", c.Metrics["ttls"].P50, c.Metrics["ttls"].Max, c.Redeliveries)
}

// testHooksAndStreams: hooks created on a worker are resumed by the driver,
// and a stream's writer and reader steps (on either worker) measure chunk
// latency on one clock: no negative samples.
func testHooksAndStreams(t *testing.T, url string, replicas int) {
	startWorker(t, url, "w1", "--concurrency", "4")
	startWorker(t, url, "w2", "--concurrency", "4")
	const reps = 4
	s := startSweep(t, url, "--expect-workers", "2", "--scenario", "hook-step,stream-latency", "--versions", "pending-count",
		"--switches", "none", "--reps", fmt.Sprint(reps), "--warmup", "0", "--nats-replicas", fmt.Sprint(replicas))
	s.wait(t, 120*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	f := s.results(t)
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	for _, c := range f.Cells {
		if c.Runs != reps || c.Errors != 0 || c.Stalls != 0 || c.Metrics["ttc"].Count != reps {
			t.Errorf("%s: runs %d errors %d stalls %d ttc %d (%v %v)", c.Scenario, c.Runs, c.Errors, c.Stalls, c.Metrics["ttc"].Count, c.FailedRuns, c.StalledRuns)
		}
		if !slices.Equal(c.Workers, []string{"w1", "w2"}) {
			t.Errorf("%s: workers %v", c.Scenario, c.Workers)
		}
		for name, m := range c.Metrics {
			if m.Negative > 0 {
				t.Errorf("%s: %s has %d negative samples", c.Scenario, name, m.Negative)
			}
		}
		switch c.Scenario {
		case "hook-step":
			if m := c.Metrics["resume_to_step"]; m.Count != reps {
				t.Errorf("hook-step: resume_to_step has %d samples, want %d", m.Count, reps)
			}
		case "stream-latency":
			m := c.Metrics["sl"]
			if m.Count != reps*20 {
				t.Errorf("stream-latency: sl has %d samples, want %d", m.Count, reps*20)
			}
			t.Logf("stream-latency: sl p50 %d µs p99 %d µs", m.P50, m.P99)
		}
	}
}

// testSpansOff: with --spans off the workers' engines record no spans
// (CellSpec.NoSpans) and the cell has no critical path.
func testSpansOff(t *testing.T, url string) {
	startWorker(t, url, "w1")
	s := startSweep(t, url, "--expect-workers", "1", "--branches", "8", "--versions", "pending-count",
		"--switches", "none", "--reps", "3", "--warmup", "0", "--spans", "off")
	s.wait(t, 60*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	f := s.results(t)
	if c := f.Cells[0]; c.Runs != 3 || c.Errors != 0 || len(c.CriticalPath) != 0 || !f.Plan.NoSpans() {
		t.Errorf("runs %d errors %d, critical_path %v, plan spans %q: want 3 runs and no spans", c.Runs, c.Errors, c.CriticalPath, f.Plan.Spans)
	}
}

// TestExternalWorkers runs the distributed sweep on one nats-server process.
func TestExternalWorkers(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "single"})
	t.Run("TwoWorkers", func(t *testing.T) { testTwoWorkers(t, url, 1) })
	t.Run("SpansOff", func(t *testing.T) { testSpansOff(t, url) })
	t.Run("KillWorker", func(t *testing.T) { testKillWorker(t, url, 1) })
	t.Run("StopWorker", func(t *testing.T) { testStopWorker(t, url, 1) })
	t.Run("HooksAndStreams", func(t *testing.T) { testHooksAndStreams(t, url, 1) })
}

// TestExternalWorkersCluster runs it on a three-node cluster with R3
// streams. Slow: only with DURABENCH_NATS_CLUSTER=1 (make test-cluster).
func TestExternalWorkersCluster(t *testing.T) {
	if os.Getenv("DURABENCH_NATS_CLUSTER") != "1" {
		t.Skip("set DURABENCH_NATS_CLUSTER=1 to run the three-node cluster test")
	}
	url := natstest.StartCluster(t)
	t.Run("TwoWorkers", func(t *testing.T) { testTwoWorkers(t, url, 3) })
	t.Run("KillWorker", func(t *testing.T) { testKillWorker(t, url, 3) })
	t.Run("StopWorker", func(t *testing.T) { testStopWorker(t, url, 3) })
	t.Run("HooksAndStreams", func(t *testing.T) { testHooksAndStreams(t, url, 3) })
}

// TestDriverDies: a worker whose driver was killed mid-cell stops the cell
// by itself (its messages go back to the queue) and keeps serving.
func TestDriverDies(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "orphan"})
	w := startWorker(t, url, "w1", "--concurrency", "2")
	s := startSweep(t, url, "--branches", "16", "--versions", "pending-count", "--switches", "none",
		"--reps", "20", "--warmup", "0", "--option", "body=100ms")
	w.waitLog(t, "started", 60*time.Second)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.waitLog(t, "no answer from its driver", 20*time.Second)
	w.waitLog(t, "stopped:", 20*time.Second)
}

// TestOrchestratorDiesInInlineStep: the worker whose orchestrator is running
// the stage's inline step (created, claimed, no queue message) is killed.
// The redelivered workflow message replays, finds the step created but
// unfinished, and hands it to the queue again, so the run completes on the
// other worker.
func TestOrchestratorDiesInInlineStep(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "crash"})
	a := startWorker(t, url, "a", "--concurrency", "1", "--status-every", "100ms")
	b := startWorker(t, url, "b", "--concurrency", "1", "--status-every", "100ms")
	// One branch: the orchestrator runs the only step inline, for 4 s.
	s := startSweep(t, url, "--expect-workers", "2", "--branches", "1", "--versions", "pending-count",
		"--switches", "none", "--reps", "1", "--warmup", "0", "--option", "body=4s",
		"--visibility-timeout", "2s", "--cell-timeout", "20s")
	end := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(a.log.String(), "(1 in flight)") {
			_ = a.cmd.Process.Kill()
			break
		}
		if strings.Contains(b.log.String(), "(1 in flight)") {
			_ = b.cmd.Process.Kill()
			break
		}
		if time.Now().After(end) {
			t.Fatal("no worker took the run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.wait(t, 60*time.Second)
	c := s.results(t).Cells[0]
	if c.Stalls != 0 || c.Metrics["ttc"].Count != 1 {
		t.Fatalf("the run did not complete after its orchestrator died: stalls %d %v", c.Stalls, c.StalledRuns)
	}
}

// TestDuplicateWorkerIDs: two workers with one id are refused (exit 3),
// since both would answer the cell's requests.
func TestDuplicateWorkerIDs(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "twins"})
	startWorker(t, url, "twin")
	startWorker(t, url, "twin")
	s := startSweep(t, url, "--expect-workers", "2", "--branches", "4", "--versions", "baseline",
		"--switches", "none", "--reps", "1", "--warmup", "0", "--worker-wait", "5s")
	s.wait(t, 60*time.Second)
	if s.code != 3 || !strings.Contains(s.stderr.String(), "two workers answer as twin") {
		t.Fatalf("exit %d, stderr %q: want exit 3 naming the duplicate id", s.code, s.stderr)
	}
}

// TestNoWorkers: a driver that waits for workers that never come exits 3
// with an error that says so.
func TestNoWorkers(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "lonely"})
	s := startSweep(t, url, "--expect-workers", "2", "--branches", "4", "--versions", "baseline",
		"--switches", "none", "--reps", "1", "--warmup", "0", "--worker-wait", "1s")
	s.wait(t, 60*time.Second)
	if s.code != 3 || !strings.Contains(s.stderr.String(), "0 of 2 answered") {
		t.Fatalf("exit %d, stderr %q: want exit 3 naming the missing workers", s.code, s.stderr)
	}
	t.Logf("stderr:\n%s", s.stderr)
}

// TestBadWorkersFlags: --workers external without --nats-url, on
// postgres without --postgres-url, or on another world, is a usage error.
func TestBadWorkersFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sweep", "--world", "nats", "--workers", "external"},
		{"sweep", "--world", "mem", "--workers", "external", "--nats-url", "nats://127.0.0.1:4222"},
		{"sweep", "--world", "mem", "--expect-workers", "2"},
		{"sweep", "--world", "postgres", "--workers", "external", "--nats-url", "nats://127.0.0.1:4222"},
		{"sweep", "--world", "postgres", "--workers", "external", "--postgres-url", "postgres://127.0.0.1:5432/x"},
		{"sweep", "--world", "nats,postgres", "--workers", "external", "--nats-url", "nats://127.0.0.1:4222",
			"--postgres-url", "postgres://127.0.0.1:5432/x"},
		{"sweep", "--workers", "elsewhere"},
		{"worker"},
	} {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2; stderr %q", args, err, stderr.String())
		}
	}
}

// TestExternalWorkersProfileFile: a profile file on the driver, and the
// recorded-distribution files it and the fault overrides name, reach the
// workers, so the latency they inject on the worker side (delivery, the
// orchestrator's reads and writes, the claim) shows in the measured TTFS.
func TestExternalWorkersProfileFile(t *testing.T) {
	url := startServer(t, natstest.Spec{Name: "profiled"})
	startWorker(t, url, "w1")
	// The files exist only in the driver's working directory: the worker
	// (another directory, as on another machine) can only get their text.
	dir := t.TempDir()
	files := map[string]string{
		// Every call 5 ms, from a recorded distribution beside the profile.
		"profiles/fixed5.yaml":  "name: fixed5\nops:\n  default: {latency: {dist: hdr, file: rec/five.txt, unit: us}}\n",
		"profiles/rec/five.txt": "# value(us) count\n5000 100\n",
		// Deliveries 6 ms, from a file named by a fault override.
		"six.txt": "6000 100\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startSweepIn(t, dir, url, "--expect-workers", "1", "--branches", "1", "--versions", "resilient-inband",
		"--switches", "none", "--reps", "3", "--warmup", "0", "--profile", "profiles/fixed5.yaml",
		"--faults", "deliver.latency=hdr:six.txt", "--cell-timeout", "30s")
	s.wait(t, 60*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	c := s.results(t).Cells[0]
	// 8 calls of 5 ms lie before the first step body, 6 of them on the worker.
	if ttfs := time.Duration(c.Metrics["ttfs"].P50) * time.Microsecond; ttfs < 38*time.Millisecond {
		t.Errorf("TTFS p50 %v: the workers did not apply the driver's profile file (want ≥ 38ms)", ttfs)
	}
}
