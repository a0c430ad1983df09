package reporters

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
)

// TestWaterfall: one run's critical path in the terminal — a line per
// segment in time order with its offset from the scheduled start, its
// length, category and span, and a bar on the run's time axis whose
// lengths add up to the axis (the segments add up to the TTLS); then the
// time per category, largest first. A run without a path, or unfinished,
// says so instead of drawing nothing.
func TestWaterfall(t *testing.T) {
	ms := time.Millisecond
	tl := metrics.RunTimeline{ID: "c-r0001", T0: time.Second, Finished: true,
		Steps: []engine.StepSpan{{Start: time.Second + 45*ms, End: time.Second + 100*ms}},
		Path: []metrics.PathSegment{ // as stored: not in time order
			{Category: "write", Start: time.Second + 40*ms, End: time.Second + 100*ms, Name: "step_completed", Step: "0.3"},
			{Category: "start", Start: time.Second, End: time.Second + 10*ms, Name: "run_create"},
			{Category: "queue_wait", Start: time.Second + 10*ms, End: time.Second + 40*ms, Name: "queue", Step: "0.3"},
		}}
	var b bytes.Buffer
	if err := Waterfall(&b, "fanout branches=4 baseline mem/none", &tl); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "run c-r0001 · fanout branches=4 baseline mem/none · TTLS 100.0ms, 3 segments") {
		t.Fatalf("want a header, a column line, 3 segments and the categories:\n%s", out)
	}
	bars := 0
	for i, want := range []string{"start", "queue_wait", "write"} {
		f := strings.Fields(lines[2+i])
		if len(f) < 4 || f[2] != want {
			t.Errorf("segment %d: %q, want category %s (time order)", i, lines[2+i], want)
		}
		bars += strings.Count(lines[2+i], "█")
	}
	if bars != waterfallWidth {
		t.Errorf("bars add up to %d characters, want the axis's %d:\n%s", bars, waterfallWidth, out)
	}
	if !strings.Contains(lines[4], "step_completed 0.3") {
		t.Errorf("the write's span and step are not named: %q", lines[4])
	}
	if want := "by category: write 60.00ms (60%) · queue_wait 30.00ms (30%) · start 10.00ms (10%)"; !strings.Contains(lines[5], want) {
		t.Errorf("categories %q, want %q", lines[5], want)
	}

	b.Reset()
	tl.Path = nil
	if err := Waterfall(&b, "c", &tl); err != nil || !strings.Contains(b.String(), "no critical path kept") {
		t.Errorf("a run without a path: %q", b.String())
	}
	b.Reset()
	tl.Finished, tl.Cut = false, 5*time.Second
	if err := Waterfall(&b, "c", &tl); err != nil || !strings.Contains(b.String(), "unfinished after 4.000s") {
		t.Errorf("an unfinished run: %q", b.String())
	}
}

// TestWaterfallCompletion: a run recorded done well after its last step,
// whose spans were kept, gets its path to completion drawn after its
// critical path: the tail (the completer's log load and terminal write)
// on a TTC axis, its categories adding up to the TTC.
func TestWaterfallCompletion(t *testing.T) {
	ms := time.Millisecond
	sp := func(cat, name string, start, end time.Duration, id, parent, after uint64, stage, index int) metrics.Span {
		return metrics.Span{Category: cat, Name: name, Start: start * ms, End: end * ms, Stage: stage, Index: index,
			ID: id, Parent: parent, After: after}
	}
	tl := metrics.RunTimeline{ID: "c-r0002", Finished: true, Done: 80 * ms,
		Steps: []engine.StepSpan{{Start: 10 * ms, End: 20 * ms}},
		Spans: []metrics.Span{
			sp(metrics.CatQueueWait, "queue", 0, 10, 1, 0, 0, 0, 0),
			sp(metrics.CatCompute, "task", 10, 80, 2, 0, 1, 0, 0),
			sp(metrics.CatBody, "body", 10, 20, 3, 2, 0, 0, 0),
			sp(metrics.CatLogLoad, "log_load", 20, 40, 4, 2, 0, -1, -1),
			sp(metrics.CatWrite, "run_completed", 40, 80, 5, 2, 0, -1, -1),
		}}
	tl.Path, _ = metrics.RunPath(&tl)
	var b bytes.Buffer
	if err := Waterfall(&b, "c", &tl); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	_, tail, ok := strings.Cut(out, "\n\n  path to completion · TTC 80.00ms (60.00ms after the last step), 4 segments\n")
	if !ok {
		t.Fatalf("no path to completion after the critical path:\n%s", out)
	}
	if want := "by category: write 40.00ms (50%) · log_load 20.00ms (25%) · queue_wait 10.00ms (12%) · body 10.00ms (12%)"; !strings.Contains(tail, want) {
		t.Errorf("path to completion:\n%s\nwant %q", tail, want)
	}
	if n := strings.Count(tail, "█"); n != waterfallWidth {
		t.Errorf("its bars add up to %d characters, want %d", n, waterfallWidth)
	}
}
