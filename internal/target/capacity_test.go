package target_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/internal/testchild"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// childEnv names the backend a re-executed test binary serves (see
// TestMain): the driver's benchmarks need their target in another process,
// as a sweep's is, so that the driver's CPU and the target's are apart.
// procsEnv is the processors it runs on (--procs; absent: every core).
const (
	childEnv = "DURABENCH_TARGET_CHILD"
	procsEnv = "DURABENCH_TARGET_PROCS"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(childEnv); kind != "" {
		os.Exit(serveChild(kind))
	}
	os.Exit(m.Run())
}

// serveChild serves the backend kind ("reference": the built-in engine,
// version resilient, on mem; "null": no engine) on a loopback port, prints
// its URL and serves until its standard input closes.
func serveChild(kind string) int {
	if p := os.Getenv(procsEnv); p != "" {
		n, err := strconv.Atoi(p)
		if err == nil {
			err = protocol.SetProcs(n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, procsEnv, err)
			return 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	var b protocol.Backend = &nullBackend{rt: world.NewReal()}
	if kind == "reference" {
		v, err := engine.LookupVersion("resilient")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b = reference.New(mem.New(world.Options{}), v)
	}
	if err := protocol.Serve(ctx, "127.0.0.1:0", b, os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// nullBackend is the loopback HTTP floor: the protocol's requests with no
// engine behind them. A started run has run its one step and finished by
// the time the start request is answered.
type nullBackend struct {
	rt   *world.Real
	sink protocol.Sink
}

func (n *nullBackend) Info() protocol.Info {
	return protocol.Info{Protocol: protocol.ProtocolVersion, Engine: "null", Version: "0",
		Clock: "monotonic ns since the server started", Scenarios: []protocol.Scenario{{Name: "step"}}}
}

func (n *nullBackend) Now() time.Duration { return n.rt.Now() }

func (n *nullBackend) Open(_ context.Context, sink protocol.Sink) error { n.sink = sink; return nil }

func (n *nullBackend) Start(_ context.Context, req protocol.StartRequest) error {
	at := int64(n.rt.Now())
	for _, kind := range []string{protocol.EventRunStarted, protocol.EventStepStarted, protocol.EventStepCompleted, protocol.EventRunCompleted} {
		n.sink.Event(req.Run, protocol.Event{Kind: kind, At: at, Source: protocol.SourceHistory, Attempt: 1})
	}
	n.sink.Finished(req.Run, false, "")
	return nil
}

func (n *nullBackend) Resume(context.Context, string, string, protocol.ResumeRequest) error {
	return nil
}

func (n *nullBackend) Close(context.Context) error { return nil }

// child is a target served by a re-executed test binary.
type child struct {
	url string
	pid int
}

// cpu is the child's user + system CPU time so far, 0 when it cannot be
// read.
func (c child) cpu() time.Duration {
	d, _ := target.ProcessCPU(c.pid)
	return d
}

// startChild starts a child serving kind on procs processors (0: every
// core); the child stops when the benchmark ends.
func startChild(tb testing.TB, kind string, procs int) child {
	tb.Helper()
	c := testchild.Start(tb, childEnv+"="+kind, procsEnv+"="+strconv.Itoa(procs))
	url, err := bufio.NewReader(c.Out).ReadString('\n')
	if err != nil {
		tb.Fatalf("%s target: %v", kind, err)
	}
	return child{url: strings.TrimSpace(url), pid: c.Cmd.Process.Pid}
}

// cpuTime is this process's user + system CPU time (getrusage): the
// driver's, the target being another process.
func cpuTime() time.Duration {
	d, _ := target.SelfCPU()
	return d
}

// protocolFigures are one open-paced single-step cell through the
// protocol, as a sweep's summary has them.
type protocolFigures struct {
	ttfsP50, lagP50, lagP99 float64 // µs
	// startToStepP50 is the median of each run's TTFS less its lag: the
	// time from the start request to the step body, the target's share.
	startToStepP50 float64 // µs
	runsPerSec     float64 // measured runs / the measured phase
	cpuShare       float64 // the driver process's CPU / wall time
	cpuPerRun      float64 // the driver process's CPU per run, warm-up included (µs)
	// targetCPUPerRun is the target process's CPU per run, warm-up
	// included (µs; to the 10 ms of the kernel's accounting).
	targetCPUPerRun float64
	// stealCores is what the host took from the machine's vCPUs while
	// the cell ran (target.Steal over wall time, in cores).
	stealCores float64
	errors     int
}

// protocolCell runs one cell of the step scenario on the target tgt,
// open-paced at rate for runs runs (a tenth more as warm-up), the session
// reaching it by mode: "stream" (the built-in server's session stream),
// "batch" (batch starts and polls) or "per-run" (a request per start and
// a long poll per run).
func protocolCell(tb testing.TB, tgt child, rate float64, runs int, coarse bool, mode string) protocolFigures {
	tb.Helper()
	url := tgt.url
	ctx := context.Background()
	sc, err := scenarios.Get("step")
	if err != nil {
		tb.Fatal(err)
	}
	p, _, err := sc.Build(scenarios.Values(nil))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := target.NewClient(url)
	if err != nil {
		tb.Fatal(err)
	}
	switch mode {
	case "batch":
		c.MaxBatch = protocol.BatchStarts
	case "per-run":
		c.PerRun = true
	}
	w := mem.New(world.Options{}) // the driver's clock
	defer w.Close()
	sess, err := target.NewSession(ctx, c, "step", nil, w.Runtime())
	if err != nil {
		tb.Fatal(err)
	}
	steal0, _ := target.Steal()
	cpu0, tcpu0, wall0 := cpuTime(), tgt.cpu(), time.Now()
	res, err := driver.Run(ctx, driver.Config{World: w, Program: p, Target: sess,
		RunPrefix: fmt.Sprintf("cap%d", time.Now().UnixNano()), Reps: runs, Warmup: runs / 10,
		Pacer: driver.OpenRate{Rate: rate}, CellTimeout: time.Minute, CoarsePacing: coarse})
	if err != nil {
		tb.Fatal(err)
	}
	cpu, tcpu, wall := cpuTime()-cpu0, tgt.cpu()-tcpu0, time.Since(wall0)
	steal1, _ := target.Steal()
	cell := res.Summarize(results.Cell{Scenario: "step"}, metrics.Config{}, true)
	f := protocolFigures{runsPerSec: float64(len(res.Timelines)) / res.Elapsed.Seconds(),
		cpuShare: cpu.Seconds() / wall.Seconds(), cpuPerRun: float64(cpu.Microseconds()) / float64(runs+runs/10),
		targetCPUPerRun: float64(tcpu.Microseconds()) / float64(runs+runs/10),
		stealCores:      (steal1 - steal0).Seconds() / wall.Seconds(),
		errors:          cell.Errors + len(res.Unstarted)}
	if len(cell.FailedRuns) > 0 {
		tb.Logf("%s: %d of %d runs failed, first: %s", url, len(cell.FailedRuns), runs, cell.FailedRuns[0].Error)
	}
	if m, ok := cell.Metrics[metrics.TTFS]; ok {
		f.ttfsP50 = float64(m.P50)
	}
	if cell.DriverLag != nil {
		f.lagP50, f.lagP99 = float64(cell.DriverLag.P50), float64(cell.DriverLag.P99)
	}
	var fromStart []float64
	for i, tl := range res.Timelines {
		if len(tl.Steps) > 0 && i < len(res.Lag) {
			fromStart = append(fromStart, float64(tl.Steps[0].Start-tl.T0-res.Lag[i])/1e3)
		}
	}
	if len(fromStart) > 0 {
		slices.Sort(fromStart)
		f.startToStepP50 = fromStart[len(fromStart)/2]
	}
	return f
}

// median is the median of get over fs.
func median(fs []protocolFigures, get func(protocolFigures) float64) float64 {
	v := make([]float64, len(fs))
	for i, f := range fs {
		v[i] = get(f)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkProtocolPacing: what precise pacing costs a target in another
// process. The reference target (built-in engine on mem) runs in a child
// process; single-step cells of half a second open at 1,000 runs/s
// alternate precise and coarse pacing, b.N of each. A target slowed by the
// driver's spinning would take longer from each start request to its
// step (start-to-step p50, TTFS less the driver's lag, run by run): their
// ratio precise/coarse is the cost, 1 within noise. TTFS p50 and lag p50
// are each side's own.
func BenchmarkProtocolPacing(b *testing.B) {
	ref := startChild(b, "reference", 0)
	const rate, runs = 1000, 500
	var precise, coarse []protocolFigures
	for range b.N {
		precise = append(precise, protocolCell(b, ref, rate, runs, false, "stream"))
		coarse = append(coarse, protocolCell(b, ref, rate, runs, true, "stream"))
	}
	sts := func(f protocolFigures) float64 { return f.startToStepP50 }
	ttfs := func(f protocolFigures) float64 { return f.ttfsP50 }
	b.ReportMetric(median(precise, sts), "start-to-step-p50-us")
	b.ReportMetric(median(coarse, sts), "coarse-start-to-step-p50-us")
	b.ReportMetric(median(precise, sts)/median(coarse, sts), "precise/coarse")
	b.ReportMetric(median(precise, ttfs), "ttfs-p50-us")
	b.ReportMetric(median(coarse, ttfs), "coarse-ttfs-p50-us")
	b.ReportMetric(median(precise, func(f protocolFigures) float64 { return f.lagP50 }), "lag-p50-us")
	b.ReportMetric(median(coarse, func(f protocolFigures) float64 { return f.lagP50 }), "coarse-lag-p50-us")
	b.ReportMetric(100*median(precise, func(f protocolFigures) float64 { return f.cpuShare }), "cpu-%")
	b.ReportMetric(100*median(coarse, func(f protocolFigures) float64 { return f.cpuShare }), "coarse-cpu-%")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCapacityProtocol: how many single-step runs per second one
// driver sustains through the protocol, open-paced at 10,000/s for one
// second against the reference target in another process, next to the
// loopback HTTP floor (the same requests, no engine: nullBackend), with
// its lag, errors (runs failed, unstarted or lost, all counted) and the
// driver process's and the target's CPU per run. The target runs on one
// processor (--procs 1: on a machine it shares with the driver, what leaves
// the driver a core); the same cell against it on every core (all-procs-*)
// runs beside it. The session starts and follows its runs on a session
// stream (batch 3); the same cell with batch starts and polls (batch 2)
// and with a request per start and per poll (protocol 1.1 without batch)
// runs in the same benchmark: stream/batch and stream/per-run are what
// each gained.
func BenchmarkCapacityProtocol(b *testing.B) {
	ref, all, null := startChild(b, "reference", 1), startChild(b, "reference", 0), startChild(b, "null", 0)
	const rate, runs = 10000, 10000
	var eng, allProcs, floor, batch, perRun []protocolFigures
	for range b.N {
		eng = append(eng, protocolCell(b, ref, rate, runs, false, "stream"))
		allProcs = append(allProcs, protocolCell(b, all, rate, runs, false, "stream"))
		floor = append(floor, protocolCell(b, null, rate, runs, false, "stream"))
		batch = append(batch, protocolCell(b, ref, rate, runs, false, "batch"))
		perRun = append(perRun, protocolCell(b, ref, rate, runs, false, "per-run"))
	}
	rps := func(f protocolFigures) float64 { return f.runsPerSec }
	b.ReportMetric(median(eng, rps), "runs/s")
	b.ReportMetric(median(floor, rps), "floor-runs/s")
	b.ReportMetric(median(eng, rps)/median(floor, rps), "engine/floor")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.lagP50 }), "lag-p50-us")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.lagP99 }), "lag-p99-us")
	b.ReportMetric(median(floor, func(f protocolFigures) float64 { return f.lagP99 }), "floor-lag-p99-us")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.stealCores }), "steal-cores")
	b.ReportMetric(median(floor, func(f protocolFigures) float64 { return f.stealCores }), "floor-steal-cores")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return float64(f.errors) }), "errors")
	b.ReportMetric(median(floor, func(f protocolFigures) float64 { return float64(f.errors) }), "floor-errors")
	b.ReportMetric(100*median(eng, func(f protocolFigures) float64 { return f.cpuShare }), "cpu-%")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.cpuPerRun }), "cpu-us/run")
	b.ReportMetric(median(floor, func(f protocolFigures) float64 { return f.cpuPerRun }), "floor-cpu-us/run")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.targetCPUPerRun }), "target-cpu-us/run")
	b.ReportMetric(median(eng, func(f protocolFigures) float64 { return f.ttfsP50 }), "ttfs-p50-us")
	b.ReportMetric(median(allProcs, rps), "all-procs-runs/s")
	b.ReportMetric(median(allProcs, func(f protocolFigures) float64 { return f.lagP99 }), "all-procs-lag-p99-us")
	b.ReportMetric(median(allProcs, func(f protocolFigures) float64 { return float64(f.errors) }), "all-procs-errors")
	b.ReportMetric(median(allProcs, func(f protocolFigures) float64 { return f.cpuPerRun }), "all-procs-cpu-us/run")
	b.ReportMetric(median(allProcs, func(f protocolFigures) float64 { return f.targetCPUPerRun }), "all-procs-target-cpu-us/run")
	b.ReportMetric(median(allProcs, func(f protocolFigures) float64 { return f.ttfsP50 }), "all-procs-ttfs-p50-us")
	b.ReportMetric(median(batch, rps), "batch-runs/s")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return f.lagP50 }), "batch-lag-p50-us")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return f.lagP99 }), "batch-lag-p99-us")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return float64(f.errors) }), "batch-errors")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return f.cpuPerRun }), "batch-cpu-us/run")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return f.targetCPUPerRun }), "batch-target-cpu-us/run")
	b.ReportMetric(median(batch, func(f protocolFigures) float64 { return f.ttfsP50 }), "batch-ttfs-p50-us")
	b.ReportMetric(median(perRun, rps), "per-run-runs/s")
	b.ReportMetric(median(eng, rps)/median(perRun, rps), "stream/per-run")
	b.ReportMetric(median(perRun, func(f protocolFigures) float64 { return f.lagP99 }), "per-run-lag-p99-us")
	b.ReportMetric(median(perRun, func(f protocolFigures) float64 { return float64(f.errors) }), "per-run-errors")
	b.ReportMetric(median(perRun, func(f protocolFigures) float64 { return f.cpuPerRun }), "per-run-cpu-us/run")
	b.ReportMetric(0, "ns/op")
}
