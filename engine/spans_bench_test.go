package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/internal/testchild"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	natsworld "github.com/durabench/durabench/world/nats"
)

// noSpans hides the Recorder's Spans method: an engine given it records
// no spans (engine.SpanObserver is checked once, in engine.New).
type noSpans struct{ engine.Observer }

// spansSide is one engine on its own world, its runs recorded by a
// metrics.Recorder as a sweep's driver records them.
type spansSide struct {
	rec    *metrics.Recorder
	eng    *engine.Engine
	rt     world.Runtime
	labels pprof.LabelSet
}

func sideName(spans bool) string {
	if spans {
		return "spans"
	}
	return "none"
}

func newSpansSide(tb testing.TB, spans bool) *spansSide {
	return newSpansSideOn(tb, spans, mem.New(world.Options{}), sideName(spans))
}

// newSpansSideOn is a side on w, its goroutines labelled side=label.
func newSpansSideOn(tb testing.TB, spans bool, w world.World, label string) *spansSide {
	s, stop, err := openSpansSide(spans, w, label)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return s
}

// openSpansSide starts an engine of the spans benchmarks' version on w,
// recording spans or not; stop stops it and closes w.
func openSpansSide(spans bool, w world.World, label string) (s *spansSide, stop func(), err error) {
	ctx := context.Background()
	rec := metrics.NewRecorder()
	var obs engine.Observer = rec
	if !spans {
		obs = noSpans{rec}
	}
	v, err := engine.LookupVersion(spansVersion())
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	eng, err := engine.New(engine.Config{World: w, Features: v.Features, Observer: obs, Concurrency: fanout.Concurrency})
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	// The side's goroutines carry its name as a profile label (side=spans
	// or none): a CPU profile of the benchmark tells the sides apart.
	labels := pprof.Labels("side", label)
	pprof.Do(ctx, labels, func(ctx context.Context) { err = eng.Start(ctx) })
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	stop = func() {
		_ = eng.Stop(ctx)
		_ = w.Close()
	}
	return &spansSide{rec: rec, eng: eng, rt: w.Runtime(), labels: labels}, stop, nil
}

// measure runs one fan-out and returns its TTLS, how many spans it
// recorded and the CPU of finding its critical path; the run's timeline
// is taken (spans and all, and its critical path found when there are
// spans, as a cell's summary does) and then forgotten.
func (s *spansSide) measure(id string, p engine.Program) (r spansRun, err error) {
	pprof.Do(context.Background(), s.labels, func(context.Context) {
		var tl metrics.RunTimeline
		if tl, err = s.finishRun(id, p); err != nil {
			return
		}
		r.ttls, _ = metrics.TimeToLastStep(&tl)
		r.spans = tl.SpanCount()
		if tl.HasEngineSpans() {
			c0 := processCPU()
			if totals, ok := metrics.RunPathTotals(&tl); !ok || totals.Sum() != r.ttls {
				err = fmt.Errorf("run %s: no critical path adding up to its TTLS", id)
			}
			r.pathCPU = processCPU() - c0
		}
	})
	return r, err
}

// finish runs p as run id to its end and returns its timeline (spans and
// all), the run then forgotten.
func (s *spansSide) finish(tb testing.TB, id string, p engine.Program) metrics.RunTimeline {
	tl, err := s.finishRun(id, p)
	if err != nil {
		tb.Fatal(err)
	}
	return tl
}

func (s *spansSide) finishRun(id string, p engine.Program) (metrics.RunTimeline, error) {
	done := make(chan struct{})
	if err := s.rec.Begin(id, s.rt.Now(), p.StepCount(), func() { close(done) }); err != nil {
		return metrics.RunTimeline{}, err
	}
	if err := s.eng.StartRun(context.Background(), id, p); err != nil {
		return metrics.RunTimeline{}, err
	}
	select {
	case <-done:
	case <-time.After(fanout.RunTimeout):
		return metrics.RunTimeline{}, fmt.Errorf("run %s did not finish in %v", id, fanout.RunTimeout)
	}
	tl, _ := s.rec.Snapshot(id, s.rt.Now())
	s.rec.Forget(id)
	return tl, nil
}

// The sides of BenchmarkSpansMem256, its A/A and BenchmarkSpansNATS256 run
// each in a process of its own: this test binary started again with
// spansChildEnv naming the side (spans, none, or aa: none under another
// name), on the world spansWorldEnv names (mem, or nats: an embedded
// server of its own). A side sharing the benchmark's process with the
// other ran on a heap both sides grow (each side's mem world keeps every
// run's log), where the first to reach fresh pages takes their faults —
// the side recording spans, which allocates more: 15–35 faults a run more
// than the other, ~10 µs each, though each side in a process of its own
// takes as many as the other.
const (
	spansChildEnv = "DURABENCH_SPANS_CHILD"
	spansWorldEnv = "DURABENCH_SPANS_WORLD"
	// spansProfileEnv, a path prefix, makes each side write the CPU
	// profile of its process to <prefix>-<side>.prof: the two compare
	// with go tool pprof -diff_base.
	spansProfileEnv = "DURABENCH_SPANS_CPUPROFILE"
)

// TestMain runs a side of the spans benchmarks when the binary is started
// as one, and the tests otherwise.
func TestMain(m *testing.M) {
	if side := os.Getenv(spansChildEnv); side != "" {
		os.Exit(spansChild(side, os.Getenv(spansWorldEnv), os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// spansRun is what a side reports of one run: its TTLS, and what its
// process spent on it (the run and the taking of its timeline, its
// critical path included): CPU (collections and page faults included),
// minor page faults, bytes allocated, the CPU of finding the path, and
// the spans it recorded.
type spansRun struct {
	ttls, cpu, pathCPU time.Duration
	faults, allocs     int64
	spans              int
}

// spansChild is a side's process: for each line on in (a run ID) it runs
// one 256-branch fan-out on a freshly collected heap and writes a line
// with what it measured to out (or "error: …", and returns 1).
func spansChild(side, worldName string, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(out, "error: %s side: %v\n", side, err)
		return 1
	}
	var w world.World
	switch worldName {
	case "", "mem":
		w = mem.New(world.Options{})
	case "nats":
		nw, err := natsworld.New(context.Background(), natsworld.Config{})
		if err != nil {
			return fail(err)
		}
		w = nw
	default:
		return fail(fmt.Errorf("%s=%q: not mem or nats", spansWorldEnv, worldName))
	}
	s, stop, err := openSpansSide(side == "spans", w, side)
	if err != nil {
		return fail(err)
	}
	defer stop()
	if prefix := os.Getenv(spansProfileEnv); prefix != "" {
		f, err := os.Create(prefix + "-" + side + ".prof")
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	p := engine.FanOut(256)
	var ms runtime.MemStats
	// The collector runs between runs only (below), and the memory a run
	// used stays the process's for the next: no run pays for a cycle the
	// previous one left half done, nor refaults the pages the scavenger
	// returned after it (with the collector pacing itself, each side took
	// ~140 faults a run at ~10 µs each, a seventh of its CPU).
	debug.SetGCPercent(-1)
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		debug.SetMemoryLimit(int64(ms.HeapAlloc) + 1<<30) // far above a run's ~10 MB
		a0, c0, f0 := ms.TotalAlloc, processCPU(), minorFaults()
		r, err := s.measure(lines.Text(), p)
		if err != nil {
			return fail(err)
		}
		r.cpu, r.faults = processCPU()-c0, minorFaults()-f0
		runtime.ReadMemStats(&ms)
		r.allocs = int64(ms.TotalAlloc - a0)
		fmt.Fprintf(out, "%d %d %d %d %d %d\n", r.ttls, r.cpu, r.pathCPU, r.faults, r.allocs, r.spans)
	}
	return 0
}

// spansProc is a side's process, as the benchmark drives it.
type spansProc struct {
	side string
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startSpansProc starts side's process on worldName; it is stopped when
// the benchmark ends.
func startSpansProc(b *testing.B, side, worldName string) *spansProc {
	c := testchild.Start(b, spansChildEnv+"="+side, spansWorldEnv+"="+worldName)
	return &spansProc{side: side, in: c.In, out: bufio.NewScanner(c.Out)}
}

// run has the side run one fan-out as run id.
func (p *spansProc) run(id string) (spansRun, error) {
	if _, err := io.WriteString(p.in, id+"\n"); err != nil {
		return spansRun{}, fmt.Errorf("%s side: %w", p.side, err)
	}
	if !p.out.Scan() {
		return spansRun{}, fmt.Errorf("%s side: exited (%v)", p.side, p.out.Err())
	}
	line := p.out.Text()
	if msg, ok := strings.CutPrefix(line, "error: "); ok {
		return spansRun{}, errors.New(msg)
	}
	var r spansRun
	var ttls, cpu, pathCPU int64
	if _, err := fmt.Sscan(line, &ttls, &cpu, &pathCPU, &r.faults, &r.allocs, &r.spans); err != nil {
		return spansRun{}, fmt.Errorf("%s side: %q: %w", p.side, line, err)
	}
	r.ttls, r.cpu, r.pathCPU = time.Duration(ttls), time.Duration(cpu), time.Duration(pathCPU)
	return r, nil
}

// BenchmarkSpansNATS256 is BenchmarkSpansMem256 on embedded NATS, each
// side on its own server: a backend whose calls take tens to hundreds of
// microseconds.
func BenchmarkSpansNATS256(b *testing.B) {
	benchSpans(b, "nats", "spans", "none")
}

// BenchmarkSpansMem256 measures what recording spans costs: one 256-branch
// fan-out per iteration on mem with spans recorded (and the run's critical
// path found, as a cell's summary does) and one without, in alternating
// order, each side in a process of its own (on its own world and engine),
// each run on a freshly collected heap, the collector held off until it
// ends. It reports both TTLS medians and their ratio (spans/none: target
// ≤ 1.05), the median of each iteration's ratio, the CPU time, the bytes
// allocated and the minor page faults per run of each side's process (the
// CPU a run's engine used, its garbage collection and page faults
// included: steadier than wall time on a shared machine), and the spans
// one run records. BenchmarkSpansMem256AA is its A/A. Its engines run
// resilient-inband, or the version DURABENCH_SPANS_VERSION names;
// DURABENCH_SPANS_CPUPROFILE (spansProfileEnv) profiles each side.
func BenchmarkSpansMem256(b *testing.B) {
	benchSpans(b, "mem", "spans", "none")
}

// BenchmarkSpansMem256AA is BenchmarkSpansMem256 with spans recorded on
// neither side (the harness's A/A: its ratios should be 1).
func BenchmarkSpansMem256AA(b *testing.B) {
	benchSpans(b, "mem", "aa", "none")
}

// benchSpans runs the comparison of BenchmarkSpansMem256 between two
// sides' processes on worldName.
func benchSpans(b *testing.B, worldName, with, without string) {
	sides := []*spansProc{startSpansProc(b, with, worldName), startSpansProc(b, without, worldName)}
	for i := range fanout.WarmupRuns {
		for _, s := range sides {
			if _, err := s.run("w" + strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var times [2][]time.Duration
	var sum [2]spansRun // spans: the latest run's
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "r" + strconv.Itoa(i)
		for k := range sides {
			j := (i + k) % len(sides)
			r, err := sides[j].run(id)
			if err != nil {
				b.Fatal(err)
			}
			times[j] = append(times[j], r.ttls)
			sum[j].cpu += r.cpu
			sum[j].pathCPU += r.pathCPU
			sum[j].faults += r.faults
			sum[j].allocs += r.allocs
			sum[j].spans = r.spans
		}
	}
	b.StopTimer()
	w, wo := fanout.Median(times[0]), fanout.Median(times[1])
	b.ReportMetric(fanout.Micros(w), "spans-ttls-p50-us")
	b.ReportMetric(fanout.Micros(wo), "nospans-ttls-p50-us")
	b.ReportMetric(float64(w)/float64(wo), "ratio")
	// Each iteration's two runs ran back to back, under the same load: the
	// median of their ratios is steadier than the ratio of the medians on
	// a machine whose load drifts.
	pairs := make([]float64, len(times[0]))
	for i := range pairs {
		pairs[i] = float64(times[0][i]) / float64(times[1][i])
	}
	slices.Sort(pairs)
	b.ReportMetric(pairs[len(pairs)/2], "paired-ratio")
	n := float64(b.N)
	b.ReportMetric(fanout.Micros(sum[0].cpu)/n, "spans-cpu-us/run")
	b.ReportMetric(fanout.Micros(sum[1].cpu)/n, "nospans-cpu-us/run")
	if sum[1].cpu > 0 {
		b.ReportMetric(float64(sum[0].cpu)/float64(sum[1].cpu), "cpu-ratio")
	}
	b.ReportMetric(fanout.Micros(sum[0].pathCPU)/n, "path-cpu-us/run")
	b.ReportMetric(float64(sum[0].faults)/n, "spans-faults/run")
	b.ReportMetric(float64(sum[1].faults)/n, "nospans-faults/run")
	b.ReportMetric(float64(sum[0].allocs)/n/1024, "spans-KiB/run")
	b.ReportMetric(float64(sum[1].allocs)/n/1024, "nospans-KiB/run")
	b.ReportMetric(float64(sum[0].spans), "spans/run")
}

// BenchmarkRunPath256 is the cost of finding one 256-branch run's
// critical path from its spans: its segments (path: a kept timeline's
// Path) or only its totals per category (totals: a cell's summary, done
// once per run when the cell is summarised).
func BenchmarkRunPath256(b *testing.B) {
	s := newSpansSide(b, true)
	p := engine.FanOut(256)
	done := make(chan struct{})
	if err := s.rec.Begin("one", s.rt.Now(), 256, func() { close(done) }); err != nil {
		b.Fatal(err)
	}
	if err := s.eng.StartRun(context.Background(), "one", p); err != nil {
		b.Fatal(err)
	}
	<-done
	tl, _ := s.rec.Snapshot("one", s.rt.Now())
	b.Run("path", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := metrics.RunPath(&tl); !ok {
				b.Fatal("no path")
			}
		}
	})
	b.Run("totals", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := metrics.RunPathTotals(&tl); !ok {
				b.Fatal("no path")
			}
		}
	})
}

// BenchmarkSpansCPU256 runs 256-branch fan-outs on mem with spans recorded
// (spans) or not (none), one side per sub-benchmark, and reports the
// process CPU per run (no critical path is found: only recording costs).
// Each run starts on a collected heap, as BenchmarkSpansMem256's, so
// that a profile of either side (-cpuprofile, one side per process) is a
// profile of the same runs that benchmark compares: pprof -diff_base.
// Run it with -count and compare the two sides' cpu-us/op.
func BenchmarkSpansCPU256(b *testing.B) {
	p := engine.FanOut(256)
	for _, spans := range []bool{true, false} {
		name := "none"
		if spans {
			name = "spans"
		}
		b.Run(name, func(b *testing.B) {
			s := newSpansSide(b, spans)
			var ttls []time.Duration
			one := func(id string) {
				done := make(chan struct{})
				if err := s.rec.Begin(id, s.rt.Now(), 256, func() { close(done) }); err != nil {
					b.Fatal(err)
				}
				if err := s.eng.StartRun(context.Background(), id, p); err != nil {
					b.Fatal(err)
				}
				<-done
				tl, _ := s.rec.Snapshot(id, s.rt.Now())
				d, _ := metrics.TimeToLastStep(&tl)
				ttls = append(ttls, d)
				s.rec.Forget(id)
			}
			for i := range fanout.WarmupRuns {
				one("w" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				// On a collected heap, as BenchmarkSpansMem256's runs.
				runtime.GC()
				one("r" + strconv.Itoa(i))
			}
			b.StopTimer()
			b.ReportMetric(fanout.Micros(processCPU()-cpu0)/float64(b.N), "cpu-us/op")
			b.ReportMetric(fanout.Micros(fanout.Median(ttls[fanout.WarmupRuns:])), "ttls-p50-us")
		})
	}
}

// spansVersion is the version the spans benchmarks' engines run:
// resilient-inband, or the one DURABENCH_SPANS_VERSION names.
func spansVersion() string {
	if v := os.Getenv("DURABENCH_SPANS_VERSION"); v != "" {
		return v
	}
	return "resilient-inband"
}
