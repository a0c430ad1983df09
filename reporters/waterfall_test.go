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
