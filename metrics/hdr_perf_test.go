package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
)

// perfChunk is how many records (or clock reads) are timed together; the
// two loops alternate chunk by chunk, so a noisy neighbour slows both.
const perfChunk = 4096

var perfSink time.Time

// timeAgainstNow times rec (perfChunk calls per chunk) against the same
// number of bare time.Now reads, alternating, for b.N calls in all, and
// reports ns/record, floor-ns/record and their ratio. prepare, when not nil,
// runs untimed before each chunk.
func timeAgainstNow(b *testing.B, rec func(i int), prepare func(done int)) {
	b.Helper()
	var recT, nowT time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += perfChunk {
		n := min(perfChunk, b.N-done)
		if prepare != nil {
			prepare(done)
		}
		t0 := time.Now()
		for i := range n {
			rec(done + i)
		}
		t1 := time.Now()
		for range n {
			perfSink = time.Now()
		}
		t2 := time.Now()
		recT += t1.Sub(t0)
		nowT += t2.Sub(t1)
	}
	b.StopTimer()
	if nowT <= 0 || recT <= 0 {
		return
	}
	b.ReportMetric(float64(recT)/float64(b.N), "ns/record")
	b.ReportMetric(float64(nowT)/float64(b.N), "floor-ns/record")
	b.ReportMetric(float64(recT)/float64(nowT), "ratio")
}

// BenchmarkPerfHDRRecord is one Histogram.Record of a latency spread over
// 100 µs .. 100 ms, against a bare time.Now read (target: under 100 ns and
// no allocation per record).
func BenchmarkPerfHDRRecord(b *testing.B) {
	vals := make([]int64, perfChunk)
	for i := range vals {
		vals[i] = 100 + int64(i*i)%100_000
	}
	h := metrics.NewHistogram()
	timeAgainstNow(b, func(i int) { h.Record(vals[i%perfChunk]) }, nil)
}

// BenchmarkPerfTimelineRecord is one Recorder.StepBody on a run registered
// with its expected step count (the engine's hot path into metrics), among
// 1024 registered runs, against a bare time.Now read (target: under 100 ns
// and no allocation per record).
func BenchmarkPerfTimelineRecord(b *testing.B) {
	r := metrics.NewRecorder()
	for i := range 1024 {
		if err := r.Begin(fmt.Sprintf("fanout-256-baseline-r%04d", i), 0, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	const run = "fanout-256-baseline-r0042"
	// Re-register the run before every timed chunk, so the step slice never
	// grows past its presized capacity and stays small enough to live in
	// cache: the steady state of a run, not the first touch of fresh pages.
	const perfWindow = perfChunk
	begin := func() {
		r.Forget(run)
		if err := r.Begin(run, 0, perfWindow, nil); err != nil {
			b.Fatal(err)
		}
	}
	begin()
	s := engine.StepSpan{Seq: 1, Start: 1, End: 2}
	timeAgainstNow(b, func(int) { r.StepBody(run, s) }, func(done int) {
		if done > 0 && done%perfWindow == 0 {
			begin()
		}
	})
}
