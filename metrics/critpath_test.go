package metrics_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
)

const ms = time.Millisecond

func totalsOf(t *testing.T, segs []metrics.PathSegment) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, s := range segs {
		if s.End <= s.Start {
			t.Fatalf("empty or reversed segment %+v", s)
		}
		out[s.Category] += s.End - s.Start
	}
	return out
}

// sp is a span of no step, its times in ms.
func sp(cat, name string, start, end time.Duration, id, parent, after uint64) metrics.Span {
	return metrics.Span{Category: cat, Name: name, Start: start * ms, End: end * ms, Stage: -1, Index: -1,
		ID: id, Parent: parent, After: after}
}

func checkTiles(t *testing.T, segs []metrics.PathSegment, t0, end time.Duration) {
	t.Helper()
	if len(segs) == 0 || segs[0].Start != t0 || segs[len(segs)-1].End != end {
		t.Fatalf("path %v does not span [%v, %v]", segs, t0, end)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].Start != segs[i-1].End {
			t.Fatalf("gap or overlap at segment %d: %v", i, segs)
		}
	}
}

// TestCriticalPathFollowsEdges: a run's start, an orchestrator activation
// that publishes two step messages, and the step whose message waited
// longer, which ends last: the path goes back from its completion through
// its body, claim and delivery to the publish, then through the activation
// to the start, and skips the other branch and everything after the end.
func TestCriticalPathFollowsEdges(t *testing.T) {
	spans := []metrics.Span{
		sp(metrics.CatDriverLag, "driver", 0, 2, 0, 0, 0),
		sp(metrics.CatStart, "start", 3, 10, 1, 0, 0),
		sp(metrics.CatStart, "run_create", 3, 6, 2, 1, 0),
		sp(metrics.CatStart, "publish", 6, 9, 3, 1, 0),
		sp(metrics.CatQueueWait, "queue", 9, 14, 4, 0, 3),
		sp(metrics.CatCompute, "task", 14, 60, 5, 0, 4), // the orchestrator
		sp(metrics.CatLogLoad, "log_load", 14, 20, 6, 5, 0),
		sp(metrics.CatWrite, "step_created", 21, 30, 7, 5, 0),
		sp(metrics.CatWrite, "step_created", 21, 28, 8, 5, 0),
		sp(metrics.CatPublish, "publish", 30, 35, 9, 5, 0), // branch a
		sp(metrics.CatPublish, "publish", 30, 40, 10, 5, 0),
		sp(metrics.CatQueueWait, "queue", 35, 36, 11, 0, 9),
		sp(metrics.CatQueueWait, "queue", 40, 50, 12, 0, 10),
		sp(metrics.CatCompute, "task", 36, 45, 13, 0, 11), // branch a: done early
		sp(metrics.CatWrite, "step_completed", 37, 44, 14, 13, 0),
		sp(metrics.CatCompute, "task", 50, 90, 15, 0, 12), // branch b: ends last
		sp(metrics.CatRunRead, "run_get", 50, 55, 16, 15, 0),
		sp(metrics.CatWrite, "step_started", 55, 60, 17, 15, 0),
		sp(metrics.CatBody, "body", 61, 62, 18, 15, 0),
		sp(metrics.CatWrite, "step_completed", 62, 70, 19, 15, 0),
		sp(metrics.CatLogLoad, "log_load", 70, 80, 20, 15, 0), // after the end
	}
	spans[19].Wait = 3 * ms // step_completed waited 3 ms for capacity
	segs := metrics.CriticalPath(spans, 0, 70*ms, 15)
	checkTiles(t, segs, 0, 70*ms)
	got := totalsOf(t, segs)
	want := map[string]time.Duration{
		metrics.CatDriverLag:    2 * ms,
		metrics.CatUnattributed: 1 * ms, // driver lag end → start
		metrics.CatStart:        6 * ms,
		metrics.CatQueueWait:    (5 + 10) * ms,
		metrics.CatLogLoad:      6 * ms,
		metrics.CatCompute:      (1 + 1) * ms, // load → create, claim → body
		metrics.CatWrite:        (9 + 5 + 5) * ms,
		metrics.CatContention:   3 * ms,
		metrics.CatPublish:      10 * ms,
		metrics.CatRunRead:      5 * ms,
		metrics.CatBody:         1 * ms,
	}
	for cat, d := range want {
		if got[cat] != d {
			t.Errorf("%s: %v, want %v (path %v)", cat, got[cat], d, segs)
		}
	}
	for cat, d := range got {
		if _, ok := want[cat]; !ok {
			t.Errorf("unexpected %s: %v", cat, d)
		}
	}
}

// TestCriticalPathFlatSpans: spans with no structure (a target's: a
// category, an interval, a step) go through the same walk — at each point
// the span that ended last before it — and still tile [t0, end].
func TestCriticalPathFlatSpans(t *testing.T) {
	spans := []metrics.Span{
		{Category: metrics.CatStart, Start: 1 * ms, End: 5 * ms},
		{Category: metrics.CatQueueWait, Start: 5 * ms, End: 20 * ms},
		{Category: metrics.CatBody, Start: 22 * ms, End: 30 * ms, Stage: 0, Index: 1},
		{Category: metrics.CatBody, Start: 21 * ms, End: 26 * ms, Stage: 0, Index: 0},
		{Category: metrics.CatWrite, Start: 30 * ms, End: 33 * ms, Stage: 0, Index: 1},
	}
	segs := metrics.CriticalPath(spans, 0, 33*ms, 0)
	checkTiles(t, segs, 0, 33*ms)
	got := totalsOf(t, segs)
	want := map[string]time.Duration{metrics.CatUnattributed: 3 * ms, metrics.CatStart: 4 * ms,
		metrics.CatQueueWait: 15 * ms, metrics.CatBody: 8 * ms, metrics.CatWrite: 3 * ms}
	for cat, d := range want {
		if got[cat] != d {
			t.Errorf("%s: %v, want %v (path %v)", cat, got[cat], d, segs)
		}
	}
}

// TestCriticalPathSupersededAndMalformed: a span reported twice counts as
// its last report; a parent cycle, links to nowhere and spans outside
// [t0, end] never stop the path from tiling [t0, end].
func TestCriticalPathSupersededAndMalformed(t *testing.T) {
	spans := []metrics.Span{
		{Category: metrics.CatCompute, Start: 10 * ms, End: 12 * ms, ID: 1},          // first report of the task
		{Category: metrics.CatWrite, Start: 11 * ms, End: 20 * ms, ID: 2, Parent: 1}, // child
		{Category: metrics.CatCompute, Start: 10 * ms, End: 40 * ms, ID: 1},          // the task, as it ended
		{Category: metrics.CatCompute, Start: 0, End: 5 * ms, ID: 7, Parent: 8, After: 99},
		{Category: metrics.CatCompute, Start: 1 * ms, End: 4 * ms, ID: 8, Parent: 7},
		{Category: metrics.CatBody, Start: -5 * ms, End: 2 * ms},
	}
	segs := metrics.CriticalPath(spans, 0, 25*ms, 1)
	checkTiles(t, segs, 0, 25*ms)
	if got := totalsOf(t, segs)[metrics.CatWrite]; got != 9*ms {
		t.Errorf("write %v, want 9ms (path %v)", got, segs)
	}
	if segs := metrics.CriticalPath(spans, 5*ms, 5*ms, 0); segs != nil {
		t.Errorf("an empty interval has a path: %v", segs)
	}
}

// TestCriticalPathRandomTiles: whatever the spans, the path tiles [t0,
// end].
func TestCriticalPathRandomTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cats := []string{metrics.CatCompute, metrics.CatWrite, metrics.CatQueueWait, metrics.CatPublish}
	for range 500 {
		n := r.IntN(40)
		spans := make([]metrics.Span, n)
		for i := range spans {
			s := time.Duration(r.IntN(1000))
			spans[i] = metrics.Span{Category: cats[r.IntN(len(cats))], Start: s, End: s + time.Duration(r.IntN(300)),
				Wait: time.Duration(r.IntN(50)), ID: uint64(r.IntN(n + 1)), Parent: uint64(r.IntN(n + 1)), After: uint64(r.IntN(n + 1))}
		}
		t0, end := time.Duration(r.IntN(100)), time.Duration(100+r.IntN(1200))
		from := uint64(r.IntN(n + 1))
		segs := metrics.CriticalPath(spans, t0, end, from)
		checkTiles(t, segs, t0, end)
		if metrics.Totals(segs).Sum() != end-t0 {
			t.Fatalf("sum %v, want %v", metrics.Totals(segs).Sum(), end-t0)
		}
		// The totals-only walk (a cell's summary) finds the same path.
		if got, want := metrics.PathTotalsOf(spans, t0, end, from), metrics.Totals(segs); got != want {
			t.Fatalf("totals %v, want %v", got, want)
		}
	}
}

// TestMicrosAddUp: whole microseconds per category add up exactly to the
// truncated total, and no category moves by a microsecond or more.
func TestMicrosAddUp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var p metrics.PathTotals
		for i := range p {
			if r.IntN(3) > 0 {
				p[i] = time.Duration(r.Int64N(int64(5 * time.Second)))
			}
		}
		total := p.Sum().Microseconds()
		us := p.Micros(total)
		var sum int64
		for i, v := range us {
			sum += v
			if d := time.Duration(v)*time.Microsecond - p[i]; d <= -time.Microsecond || d >= time.Microsecond {
				t.Fatalf("category %d: %d µs for %v", i, v, p[i])
			}
		}
		if sum != total {
			t.Fatalf("sum %d µs, want %d", sum, total)
		}
	}
	var p metrics.PathTotals
	p[0] = 10 * time.Microsecond
	for _, total := range []int64{0, 4, 10, 25} {
		var sum int64
		for _, v := range p.Micros(total) {
			sum += v
		}
		if sum != total {
			t.Errorf("total %d: sum %d", total, sum)
		}
	}
}

// TestClassify: the built-in engine's spans fall into the documented
// categories; a start's calls are the start's.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		s    engine.Span
		in   engine.SpanKind
		want string
	}{
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.OpLoad)}, engine.SpanTask, metrics.CatLogLoad},
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.AppendOp(world.StepCompleted))}, engine.SpanTask, metrics.CatWrite},
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.OpPublish)}, engine.SpanTask, metrics.CatPublish},
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.OpPublish)}, engine.SpanStart, metrics.CatStart},
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.OpGetRun)}, engine.SpanTask, metrics.CatRunRead},
		{engine.Span{Kind: engine.SpanCall, Op: engine.OpOf(world.OpHookRun)}, engine.SpanResume, metrics.CatRunRead},
		{engine.Span{Kind: engine.SpanQueue}, 0, metrics.CatQueueWait},
		{engine.Span{Kind: engine.SpanBody}, engine.SpanTask, metrics.CatBody},
		{engine.Span{Kind: engine.SpanTask}, 0, metrics.CatCompute},
		{engine.Span{Kind: engine.SpanStart}, 0, metrics.CatStart},
	} {
		if got := metrics.Classify(c.s, c.in); got != c.want {
			t.Errorf("%v %s in %v: %s, want %s", c.s.Kind, c.s.Op.Op(), c.in, got, c.want)
		}
	}
	if len(metrics.Categories) != metrics.NumCategories {
		t.Errorf("%d categories, NumCategories %d", len(metrics.Categories), metrics.NumCategories)
	}
}

// TestDocsQuoteTheCategories: docs/critical-path.md's table of categories
// says exactly what metrics.Categories says.
func TestDocsQuoteTheCategories(t *testing.T) {
	doc, err := os.ReadFile("../docs/critical-path.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range metrics.Categories {
		row := "| `" + c.Name + "` | " + c.Definition + " |"
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/critical-path.md has no row\n%s", row)
		}
	}
}

// TestCategoryIndexes: the walk's switch from a category's name to its
// index agrees with Categories.
func TestCategoryIndexes(t *testing.T) {
	for i, c := range metrics.Categories {
		if got := metrics.CategoryOrUnattributed(c.Name); got != i {
			t.Errorf("%s: %d, want %d", c.Name, got, i)
		}
	}
	if len(metrics.CategoryConsts) != len(metrics.Categories) {
		t.Fatalf("%d index constants for %d categories", len(metrics.CategoryConsts), len(metrics.Categories))
	}
	for i, c := range metrics.CategoryConsts {
		if c != i {
			t.Errorf("the constant of %s is %d, want %d", metrics.Categories[i].Name, c, i)
		}
	}
	if got, want := metrics.CategoryOrUnattributed("no such"), metrics.NumCategories-1; got != want {
		t.Errorf("an unknown name: %d, want %d (unattributed)", got, want)
	}
}

// TestCompletionPathStartsAtTheTerminalWrite: the path to completion
// starts at the write of the terminal event — ending at it (the built-in
// engine's event is its write's end: the task holding the write, the write
// last), or in flight at it (an engine that stamps the event as its write
// starts: the write's part up to the event last, then the task it ran in)
// — and tiles [t0, Done]; another task's later duplicate write is not on it.
func TestCompletionPathStartsAtTheTerminalWrite(t *testing.T) {
	base := []metrics.Span{
		sp(metrics.CatQueueWait, "queue", 0, 10, 1, 0, 0),
		sp(metrics.CatCompute, "task", 10, 60, 2, 0, 1), // a continuation: loads, replays
		sp(metrics.CatLogLoad, "log_load", 10, 20, 3, 2, 0),
		sp(metrics.CatCompute, "workflow.replay", 20, 48, 4, 2, 0),
		sp(metrics.CatCompute, "task", 12, 90, 6, 0, 0), // another one, which writes again later
		sp(metrics.CatWrite, "world.events.create run_completed", 70, 90, 7, 6, 0),
	}
	for _, tc := range []struct {
		name  string
		write metrics.Span
		done  time.Duration
		last  metrics.PathSegment // the path's last segment
		want  map[string]time.Duration
	}{
		{"ended at the event", sp(metrics.CatWrite, "run_completed", 50, 60, 5, 2, 0), 60 * ms,
			metrics.PathSegment{Category: metrics.CatWrite, Start: 50 * ms, End: 60 * ms, Span: 5, Name: "run_completed"},
			map[string]time.Duration{metrics.CatQueueWait: 10 * ms, metrics.CatLogLoad: 10 * ms, metrics.CatCompute: 30 * ms, metrics.CatWrite: 10 * ms}},
		{"in flight at the event", sp(metrics.CatWrite, "world.events.create run_completed", 50, 60, 5, 2, 0), 52 * ms,
			metrics.PathSegment{Category: metrics.CatWrite, Start: 50 * ms, End: 52 * ms, Span: 5, Name: "world.events.create run_completed"},
			map[string]time.Duration{metrics.CatQueueWait: 10 * ms, metrics.CatLogLoad: 10 * ms, metrics.CatCompute: 30 * ms, metrics.CatWrite: 2 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := metrics.RunTimeline{ID: "r", Finished: true, Done: tc.done, Spans: append([]metrics.Span{tc.write}, base...)}
			segs, ok := metrics.RunCompletionPath(&tl)
			if !ok {
				t.Fatal("no path to completion")
			}
			checkTiles(t, segs, 0, tc.done)
			if last := segs[len(segs)-1]; last != tc.last {
				t.Errorf("last segment %+v, want %+v", last, tc.last)
			}
			got := totalsOf(t, segs)
			for cat, d := range tc.want {
				if got[cat] != d {
					t.Errorf("%s %v, want %v (%v)", cat, got[cat], d, segs)
				}
			}
			totals, _ := metrics.RunCompletionPathTotals(&tl)
			if totals != metrics.Totals(segs) {
				t.Errorf("totals %v, the segments' %v", totals, metrics.Totals(segs))
			}
		})
	}
	failed := metrics.RunTimeline{ID: "f", Finished: true, Failed: true, Done: 60 * ms, Spans: base}
	if _, ok := metrics.RunCompletionPath(&failed); ok {
		t.Error("a failed run has a path to completion")
	}
}

// TestCollectNoPaths: Config.NoPaths leaves both critical paths out and
// every sample as it was.
func TestCollectNoPaths(t *testing.T) {
	tl := metrics.RunTimeline{ID: "r", Finished: true, Done: 80 * ms,
		Steps: []engine.StepSpan{{Start: 10 * ms, End: 20 * ms}},
		Spans: []metrics.Span{
			sp(metrics.CatQueueWait, "queue", 0, 10, 1, 0, 0),
			sp(metrics.CatCompute, "task", 10, 80, 2, 0, 1),
			sp(metrics.CatWrite, "run_completed", 40, 80, 5, 2, 0),
		}}
	with := metrics.Collect([]metrics.RunTimeline{tl}, metrics.Config{})
	without := metrics.Collect([]metrics.RunTimeline{tl}, metrics.Config{NoPaths: true})
	if with.CriticalPath == nil || with.CompletionPath == nil {
		t.Fatal("no critical paths by default")
	}
	if without.CriticalPath != nil || without.CompletionPath != nil {
		t.Errorf("NoPaths: paths %v, %v", without.CriticalPath, without.CompletionPath)
	}
	if len(with.Samples) != len(without.Samples) {
		t.Fatalf("%d samples, %d with NoPaths", len(with.Samples), len(without.Samples))
	}
	for name, s := range with.Samples {
		if o := without.Samples[name]; o == nil || !slices.Equal(o.Values, s.Values) {
			t.Errorf("%s: %v, with NoPaths %v", name, s.Values, o)
		}
	}
}
