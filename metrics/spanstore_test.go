package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// randomTasks is n tasks' spans as the engine reports them: each task's
// calls, bodies and queue span, its own span last (a few tasks with
// hundreds); some tasks reported twice (flushed at the run's end, then
// ended).
func randomTasks(r *rand.Rand, n int) [][]engine.Span {
	ops := append(world.Ops(), "an_op_from_a_newer_worker")
	kinds := []engine.SpanKind{engine.SpanStart, engine.SpanTask, engine.SpanResume}
	var out [][]engine.Span
	for k := range n {
		id := uint64(k+1) << 20
		task := engine.Span{Kind: kinds[r.IntN(len(kinds))], ID: id, Start: time.Duration(r.IntN(1000)),
			Stage: -1, Index: -1, After: uint64(r.IntN(n+1)) << 20}
		task.End = task.Start + time.Duration(r.IntN(500))
		var spans []engine.Span
		calls := r.IntN(8)
		if r.IntN(40) == 0 {
			calls = 300 + r.IntN(400) // a wide dispatch: more than a chunk in one report
		}
		for j := range calls {
			s := engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(ops[r.IntN(len(ops))]), ID: id + uint64(j) + 1, Parent: id,
				Start: task.Start + time.Duration(r.IntN(200)), Stage: int32(r.IntN(3)) - 1, Index: int32(r.IntN(300)),
				Wait: time.Duration(r.IntN(20))}
			switch r.IntN(4) {
			case 0:
				s.Kind, s.Op = engine.SpanBody, 0
			case 1:
				s.Kind, s.Op, s.Parent, s.After = engine.SpanQueue, engine.OpOf(world.OpDeliver), 0, uint64(r.IntN(n*8+1))
			}
			s.End = s.Start + time.Duration(r.IntN(300))
			spans = append(spans, s)
		}
		if r.IntN(5) == 0 {
			out = append(out, append(slices.Clone(spans[:len(spans)/2]), task))
		}
		out = append(out, append(spans, task))
	}
	return out
}

// TestPackedSpans: the Recorder keeps the engine's spans packed; unpacked
// they are what FromEngine makes of them, and a run's path over them is
// the path over FromEngine's spans.
func TestPackedSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		rec := NewRecorder()
		if err := rec.Begin("r", 0, 1+r.IntN(20), nil); err != nil {
			t.Fatal(err)
		}
		var want []Span
		tasks := randomTasks(r, 1+r.IntN(120)) // past a chunk of packed spans, often
		var mid RunTimeline
		var midWant []Span
		for k, spans := range tasks {
			rec.Spans("r", spans)
			want = FromEngine(want, spans)
			if k == len(tasks)/2 {
				mid, _ = rec.Snapshot("r", 0)
				midWant = slices.Clone(want)
			}
		}
		// A snapshot holds the spans reported before it, and only those.
		if got := mid.AllSpans(); !slices.Equal(got, midWant) {
			t.Fatalf("round %d: snapshot's spans changed: %d, want %d", round, len(got), len(midWant))
		}
		rec.Started("r", 3)
		want = append(want, Span{Category: CatDriverLag, Name: "driver", End: 3, Stage: -1, Index: -1})
		var last engine.Span
		for _, spans := range tasks {
			for _, s := range spans {
				if s.Kind == engine.SpanBody && s.End > last.End {
					last = s
				}
			}
		}
		if last.Kind == engine.SpanBody {
			rec.StepBody("r", engine.StepSpan{Stage: int(last.Stage), Index: int(last.Index), Start: last.Start, End: last.End})
		} else {
			rec.StepBody("r", engine.StepSpan{Start: 1, End: 900})
		}
		rec.RunFinished("r", 1000, false)
		tl, _ := rec.Snapshot("r", 1000)
		if got := tl.AllSpans(); !slices.Equal(got, want) {
			t.Fatalf("round %d: spans\n%v\nwant\n%v", round, got, want)
		}
		if tl.SpanCount() != len(want) {
			t.Fatalf("round %d: SpanCount %d, want %d", round, tl.SpanCount(), len(want))
		}
		end, from, ok := tl.pathStart()
		if !ok {
			t.Fatalf("round %d: no path", round)
		}
		got, _ := RunPath(&tl)
		if exp := CriticalPath(want, tl.T0, end, from); !slices.Equal(got, exp) {
			t.Fatalf("round %d: path\n%v\nwant\n%v", round, got, exp)
		}
		if tot, _ := RunPathTotals(&tl); tot != Totals(got) {
			t.Fatalf("round %d: totals %v, want %v", round, tot, Totals(got))
		}
	}
}

// TestSpanNames: an op no table knows yet (a newer worker's) is interned,
// under the same index every time.
func TestSpanNames(t *testing.T) {
	i := spanNames.of("publish")
	if spanNames.name(i) != "publish" {
		t.Fatalf("publish: %d names %q", i, spanNames.name(i))
	}
	j := spanNames.of("an_op_nobody_knows")
	if j == 0 || spanNames.of("an_op_nobody_knows") != j || spanNames.name(j) != "an_op_nobody_knows" {
		t.Fatalf("a new op: %d, %d, %q", j, spanNames.of("an_op_nobody_knows"), spanNames.name(j))
	}
	if spanNames.name(255) != "" && len(*spanNames.list.Load()) <= 255 {
		t.Error("an index beyond the table names something")
	}
}

// TestPackedSpansConcurrentSnapshots: snapshots taken while tasks report
// their spans never see a span change (go test -race).
func TestPackedSpansConcurrentSnapshots(t *testing.T) {
	rec := NewRecorder()
	if err := rec.Begin("r", 0, 64, nil); err != nil {
		t.Fatal(err)
	}
	tasks := randomTasks(rand.New(rand.NewPCG(7, 8)), 400)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, spans := range tasks {
			rec.Spans("r", spans)
		}
	}()
	var snaps []RunTimeline
	var copies [][]Span
	for {
		tl, _ := rec.Snapshot("r", 0)
		snaps, copies = append(snaps, tl), append(copies, tl.AllSpans())
		select {
		case <-done:
			for i := range snaps {
				if !slices.Equal(snaps[i].AllSpans(), copies[i]) {
					t.Fatalf("snapshot %d changed after it was taken", i)
				}
			}
			return
		default:
		}
	}
}
