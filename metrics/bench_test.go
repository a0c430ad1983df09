package metrics

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

var sinkTime time.Time

// BenchmarkTimeNow is the floor the Recorder is compared with: reading the
// clock once, which every StepBody report already costs the engine.
func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		sinkTime = time.Now()
	}
}

// BenchmarkRecorderStepBody measures one StepBody report on a registered run
// and reports its cost as a multiple of time.Now ("x-time.Now").
func BenchmarkRecorderStepBody(b *testing.B) {
	r := NewRecorder()
	for i := range 1024 {
		if err := r.Begin(fmt.Sprintf("fanout-256-baseline-r%04d", i), 0, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	const run = "fanout-256-baseline-r0042"
	r.Forget(run)
	if err := r.Begin(run, 0, window, nil); err != nil {
		b.Fatal(err)
	}
	s := engine.StepSpan{Seq: 1, Start: 1, End: 2}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%window == window-1 {
			r.rewind(run)
		}
		r.StepBody(run, s)
	}
	b.StopTimer()
	reportRatio(b)
}

// BenchmarkRecorderStepBodyParallel reports from every P onto distinct runs,
// as concurrent step consumers do.
func BenchmarkRecorderStepBodyParallel(b *testing.B) {
	r := NewRecorder()
	var next int64
	var mu = make(chan struct{}, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu <- struct{}{}
		next++
		run := fmt.Sprintf("run-%d", next)
		_ = r.Begin(run, 0, window, nil)
		<-mu
		s := engine.StepSpan{Seq: 1}
		for i := 0; pb.Next(); i++ {
			if i%window == window-1 {
				r.rewind(run)
			}
			r.StepBody(run, s)
		}
	})
}

// window bounds a benchmark run's span slice: rewinding it every window
// reports keeps memory flat however large b.N grows.
const window = 1 << 16

// rewind empties run's step slice, keeping its capacity.
func (r *Recorder) rewind(run string) {
	rec := r.lookup(run)
	rec.mu.Lock()
	rec.tl.Steps = rec.tl.Steps[:0]
	rec.mu.Unlock()
}

func reportRatio(b *testing.B) {
	if b.N < 1000 {
		return
	}
	const n = 1 << 20
	start := time.Now()
	for range n {
		sinkTime = time.Now()
	}
	floor := float64(time.Since(start)) / n
	per := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(per/floor, "x-time.Now")
}

// BenchmarkCollect10k is Collect over 10,000 fan-out runs of 20 branches.
func BenchmarkCollect10k(b *testing.B) {
	tls := syntheticFanout(10000, 20)
	b.ReportAllocs()
	for b.Loop() {
		Collect(tls, Config{})
	}
}

// syntheticFanout builds n finished fan-out timelines of branches steps with
// deterministic, varied times (for benchmarks).
func syntheticFanout(n, branches int) []RunTimeline {
	tls := make([]RunTimeline, n)
	for i := range tls {
		t0 := time.Duration(i) * time.Millisecond
		steps := make([]engine.StepSpan, branches)
		var last time.Duration
		for j := range steps {
			start := t0 + time.Duration(100+(i*7+j*13)%500)*time.Microsecond
			end := start + time.Duration(20+(i+j)%30)*time.Microsecond
			steps[j] = engine.StepSpan{Stage: 0, Index: j, Seq: j, Start: start, End: end, Attempt: 1}
			last = max(last, end)
		}
		tls[i] = RunTimeline{ID: fmt.Sprint("run-", i), T0: t0, Finished: true, Done: last + 50*time.Microsecond, Steps: steps}
	}
	return tls
}

// BenchmarkRecorderSpans256 reports one 256-branch run's spans to the
// Recorder as the built-in engine does, a task at a time (a dispatch task
// of 513 spans, 256 step tasks of 5 and 256 orchestrator tasks of 3), and
// reports the cost per span.
func BenchmarkRecorderSpans256(b *testing.B) {
	r := NewRecorder()
	var tasks [][]engine.Span
	id := uint64(1 << 20)
	task := func(kind engine.SpanKind, calls ...world.Op) {
		t := make([]engine.Span, 0, len(calls)+1)
		self := id
		id += 1 << 20
		for i, op := range calls {
			k := engine.SpanCall
			if op == "" {
				k = engine.SpanBody
			}
			t = append(t, engine.Span{Kind: k, Op: engine.OpOf(op), Start: time.Duration(i), End: time.Duration(i + 1), Stage: 1, Index: int32(i),
				ID: self + uint64(i) + 1, Parent: self})
		}
		tasks = append(tasks, append(t, engine.Span{Kind: kind, Start: 0, End: 9, Stage: -1, Index: -1, ID: self}))
	}
	dispatch := []world.Op{world.OpLoad}
	for range 256 {
		dispatch = append(dispatch, world.AppendOp(world.StepCreated), world.OpPublish)
	}
	task(engine.SpanTask, dispatch...)
	for range 256 {
		task(engine.SpanTask, world.OpDeliver, world.AppendOp(world.StepStarted), "", world.AppendOp(world.StepCompleted), world.OpPublish)
		task(engine.SpanTask, world.OpDeliver, world.OpLoad, world.OpPublish)
	}
	n := 0
	for _, t := range tasks {
		n += len(t)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		run := "fanout-256-r" + strconv.Itoa(i)
		if err := r.Begin(run, 0, 256, nil); err != nil {
			b.Fatal(err)
		}
		for _, t := range tasks {
			r.Spans(run, t)
		}
		r.Forget(run)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
}
