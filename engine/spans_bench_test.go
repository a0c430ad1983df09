package engine_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	natsworld "github.com/durabench/durabench/world/nats"
)

// noSpans hides the Recorder's Spans method: an engine given it records
// no spans (engine.SpanObserver is checked once, in engine.New).
type noSpans struct{ engine.Observer }

// spansSide is one engine on its own mem world, its runs recorded by a
// metrics.Recorder as a sweep's driver records them.
type spansSide struct {
	rec *metrics.Recorder
	eng *engine.Engine
	rt  world.Runtime
	// pathCPU is the CPU time spent finding critical paths.
	pathCPU time.Duration
	labels  pprof.LabelSet
}

func sideName(spans bool) string {
	if spans {
		return "spans"
	}
	return "none"
}

func newSpansSide(b testing.TB, spans bool) *spansSide {
	return newSpansSideOn(b, spans, mem.New(world.Options{}), sideName(spans))
}

// newSpansSideOn is a side on w, its goroutines labelled side=label.
func newSpansSideOn(b testing.TB, spans bool, w world.World, label string) *spansSide {
	ctx := context.Background()
	b.Cleanup(func() { _ = w.Close() })
	rec := metrics.NewRecorder()
	var obs engine.Observer = rec
	if !spans {
		obs = noSpans{rec}
	}
	v, err := engine.LookupVersion(spansVersion())
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(engine.Config{World: w, Features: v.Features, Observer: obs, Concurrency: fanout.Concurrency})
	if err != nil {
		b.Fatal(err)
	}
	// The side's goroutines carry its name as a profile label (side=spans
	// or none): a CPU profile of the benchmark tells the sides apart.
	labels := pprof.Labels("side", label)
	pprof.Do(ctx, labels, func(ctx context.Context) { err = eng.Start(ctx) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Stop(ctx) })
	return &spansSide{rec: rec, eng: eng, rt: w.Runtime(), labels: labels}
}

// run runs one fan-out and returns its TTLS; the run's timeline is taken
// (spans and all, and its critical path found when there are spans, as a
// cell's summary does) and then forgotten.
func (s *spansSide) run(b *testing.B, id string, p engine.Program) (d time.Duration) {
	pprof.Do(context.Background(), s.labels, func(context.Context) { d = s.runOne(b, id, p) })
	return d
}

func (s *spansSide) runOne(b *testing.B, id string, p engine.Program) time.Duration {
	tl := s.finish(b, id, p)
	d, _ := metrics.TimeToLastStep(&tl)
	if tl.HasEngineSpans() {
		c0 := processCPU()
		if totals, ok := metrics.RunPathTotals(&tl); !ok || totals.Sum() != d {
			b.Fatalf("run %s: no critical path adding up to its TTLS", id)
		}
		s.pathCPU += processCPU() - c0
	}
	return d
}

// finish runs p as run id to its end and returns its timeline (spans and
// all), the run then forgotten.
func (s *spansSide) finish(tb testing.TB, id string, p engine.Program) metrics.RunTimeline {
	done := make(chan struct{})
	if err := s.rec.Begin(id, s.rt.Now(), p.StepCount(), func() { close(done) }); err != nil {
		tb.Fatal(err)
	}
	if err := s.eng.StartRun(context.Background(), id, p); err != nil {
		tb.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(fanout.RunTimeout):
		tb.Fatalf("run %s did not finish", id)
	}
	tl, _ := s.rec.Snapshot(id, s.rt.Now())
	s.rec.Forget(id)
	return tl
}

// BenchmarkSpansNATS256 is BenchmarkSpansMem256 on embedded NATS, each
// side on its own server: a backend whose calls take tens to hundreds of
// microseconds.
func BenchmarkSpansNATS256(b *testing.B) {
	open := func() world.World {
		w, err := natsworld.New(context.Background(), natsworld.Config{})
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	benchSpans(b, newSpansSideOn(b, true, open(), "spans"), newSpansSideOn(b, false, open(), "none"))
}

// BenchmarkSpansMem256 measures what recording spans costs: one 256-branch
// fan-out per iteration on mem with spans recorded (and the run's critical
// path found, as a cell's summary does) and one without, in alternating
// order, each on its own world and engine, each on a freshly collected
// heap. It reports both TTLS medians and their ratio (spans/none: target
// ≤ 1.05), the median of each iteration's ratio, the process CPU time, the
// bytes allocated and the minor page faults per run of each side (the CPU
// a run's engine used, its garbage collection and page faults included:
// steadier than wall time on a shared machine), and the spans one run
// records. BenchmarkSpansMem256AA is its A/A.
func BenchmarkSpansMem256(b *testing.B) {
	benchSpans(b, newSpansSide(b, true), newSpansSide(b, false))
}

// BenchmarkSpansMem256AA is BenchmarkSpansMem256 with spans recorded on
// neither side (the harness's A/A: its ratios should be 1).
func BenchmarkSpansMem256AA(b *testing.B) {
	benchSpans(b, newSpansSideOn(b, false, mem.New(world.Options{}), "spans"), newSpansSide(b, false))
}

// benchSpans runs the comparison of BenchmarkSpansMem256 on two sides.
func benchSpans(b *testing.B, with, without *spansSide) {
	p := engine.FanOut(256)
	sides := []*spansSide{with, without}
	for i := range fanout.WarmupRuns {
		for _, s := range sides {
			s.run(b, "w"+strconv.Itoa(i), p)
		}
	}
	var times [2][]time.Duration
	var allocs [2]uint64
	var cpu [2]time.Duration
	var faults [2]int64
	var ms runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "r" + strconv.Itoa(i)
		for k := range sides {
			j := (i + k) % len(sides)
			// Each run starts on a collected heap: it pays for the
			// collections its own allocations bring, not for a cycle the
			// other side's run left half done (which made either side's
			// CPU and TTLS swing by 20% or more from run to run).
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before, cpu0 := ms.TotalAlloc, processCPU()
			f0 := minorFaults()
			times[j] = append(times[j], sides[j].run(b, id, p))
			cpu[j] += processCPU() - cpu0
			faults[j] += minorFaults() - f0
			runtime.ReadMemStats(&ms)
			allocs[j] += ms.TotalAlloc - before
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
	b.ReportMetric(fanout.Micros(cpu[0])/float64(b.N), "spans-cpu-us/run")
	b.ReportMetric(fanout.Micros(cpu[1])/float64(b.N), "nospans-cpu-us/run")
	if cpu[1] > 0 {
		b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-ratio")
	}
	b.ReportMetric(fanout.Micros(with.pathCPU)/float64(b.N), "path-cpu-us/run")
	b.ReportMetric(float64(faults[0])/float64(b.N), "spans-faults/run")
	b.ReportMetric(float64(faults[1])/float64(b.N), "nospans-faults/run")
	b.ReportMetric(float64(allocs[0])/float64(b.N)/1024, "spans-KiB/run")
	b.ReportMetric(float64(allocs[1])/float64(b.N)/1024, "nospans-KiB/run")
	// The spans of one run, counted on a run of its own.
	done := make(chan struct{})
	if err := with.rec.Begin("count", with.rt.Now(), 256, func() { close(done) }); err != nil {
		b.Fatal(err)
	}
	if err := with.eng.StartRun(context.Background(), "count", p); err != nil {
		b.Fatal(err)
	}
	<-done
	tl, _ := with.rec.Snapshot("count", with.rt.Now())
	b.ReportMetric(float64(tl.SpanCount()), "spans/run")
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
