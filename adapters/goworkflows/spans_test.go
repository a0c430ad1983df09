package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

// checkSpans asserts what protocol 1.2 asks of a run's span events (the
// rules `durabench target check` applies): a known category other than
// driver_lag, end >= at, wait within the span, unique ids, parent and after
// naming spans of the run, every span before the terminal event and
// inside [from, the terminal event]; and that every completed step has its
// body span, exactly the step's times, inside its task.
func checkSpans(t *testing.T, run string, evs []protocol.Event, from int64, task string) {
	t.Helper()
	ids := map[int64]protocol.Event{}
	terminal := -1
	for i, ev := range evs {
		if ev.Terminal() {
			terminal = i
		}
		if ev.Kind != protocol.EventSpan {
			continue
		}
		if terminal >= 0 {
			t.Errorf("%s: span %d after the terminal event", run, ev.SpanID)
		}
		if _, ok := metrics.CategoryIndex(ev.Category); !ok || ev.Category == metrics.CatDriverLag {
			t.Errorf("%s: span %d category %q", run, ev.SpanID, ev.Category)
		}
		if ev.End < ev.At || ev.Wait < 0 || ev.Wait > ev.End-ev.At {
			t.Errorf("%s: span %d [%d, %d] wait %d", run, ev.SpanID, ev.At, ev.End, ev.Wait)
		}
		if ev.SpanID < 1 {
			t.Errorf("%s: span without id: %+v", run, ev)
		}
		if _, dup := ids[ev.SpanID]; dup {
			t.Errorf("%s: span id %d twice", run, ev.SpanID)
		}
		ids[ev.SpanID] = ev
	}
	if terminal < 0 {
		t.Fatalf("%s: no terminal event", run)
	}
	end := evs[terminal].At
	for _, sp := range ids {
		for _, ref := range []int64{sp.Parent, sp.After} {
			if _, ok := ids[ref]; ref != 0 && !ok {
				t.Errorf("%s: span %d refers to %d, not a span of the run", run, sp.SpanID, ref)
			}
		}
		if sp.At < from || sp.End > end {
			t.Errorf("%s: span %d %s [%d, %d] outside the run [%d, %d]", run, sp.SpanID, sp.Name, sp.At, sp.End, from, end)
		}
	}
	started := map[[2]int]int64{}
	for _, ev := range evs {
		switch ev.Kind {
		case protocol.EventStepStarted:
			started[[2]int{ev.Stage, ev.Index}] = ev.At
		case protocol.EventStepCompleted:
			found := false
			for _, sp := range ids {
				if sp.Category == metrics.CatBody && sp.Stage == ev.Stage && sp.Index == ev.Index {
					found = sp.At == started[[2]int{ev.Stage, ev.Index}] && sp.End == ev.At &&
						ids[sp.Parent].Name == task
				}
			}
			if !found {
				t.Errorf("%s: step %d/%d has no body span at its times inside its task", run, ev.Stage, ev.Index)
			}
		}
	}
}

// pathOf walks a run's critical path the way durabench does for a 1.2
// target (metrics.RunPath on the run's spans): from the task that ran the
// last step, back to t0.
func pathOf(evs []protocol.Event, t0 int64) (segs []metrics.PathSegment, ttls time.Duration, from uint64) {
	var spans []metrics.Span
	type iv struct{ s, e int64 }
	steps := map[[2]int]*iv{}
	for _, ev := range evs {
		switch ev.Kind {
		case protocol.EventSpan:
			spans = append(spans, metrics.Span{Category: ev.Category, Name: ev.Name, Start: time.Duration(ev.At), End: time.Duration(ev.End),
				Wait: time.Duration(ev.Wait), Stage: ev.Stage, Index: ev.Index, ID: uint64(ev.SpanID), Parent: uint64(ev.Parent), After: uint64(ev.After)})
		case protocol.EventStepStarted:
			steps[[2]int{ev.Stage, ev.Index}] = &iv{s: ev.At}
		case protocol.EventStepCompleted:
			if s := steps[[2]int{ev.Stage, ev.Index}]; s != nil {
				s.e = ev.At
			}
		}
	}
	var last [2]int
	var lastEnd int64
	for k, s := range steps {
		if s.e > lastEnd {
			last, lastEnd = k, s.e
		}
	}
	for _, sp := range spans {
		if sp.Category == metrics.CatBody && sp.Stage == last[0] && sp.Index == last[1] && int64(sp.Start) == steps[last].s {
			from = sp.Parent
		}
	}
	return metrics.CriticalPath(spans, time.Duration(t0), time.Duration(lastEnd), from), time.Duration(lastEnd - t0), from
}

// shares are a path's categories as fractions of its length.
func shares(segs []metrics.PathSegment, ttls time.Duration) map[string]float64 {
	out := map[string]float64{}
	for cat, d := range totals(segs) {
		out[cat] = float64(d) / float64(ttls)
	}
	return out
}

func totals(segs []metrics.PathSegment) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range segs {
		out[s.Category] += s.End - s.Start
	}
	return out
}

// runSpans starts a run asking for its spans and follows it to its end,
// resuming its hook.
func runSpans(t *testing.T, c *target.Client, run, scenario string, opts map[string]string) []protocol.Event {
	t.Helper()
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: run, Scenario: scenario, Options: opts, Spans: true}); err != nil {
		t.Fatal(err)
	}
	tl, evs := follow(t, c, run, true)
	if tl.Status != protocol.StatusCompleted {
		t.Fatalf("%s: %s %s", run, tl.Status, tl.Error)
	}
	return evs
}

// TestSpans: fan-outs of 8, a chain, a hook-step and a step on go-workflows with
// spans asked for: every run's spans are well-formed, every step has its
// body span, and the critical path they give leaves under 15 % of TTLS
// (the walk from the start request) unattributed in the fan-outs and the
// chain; a run that does not ask has none.
func TestSpans(t *testing.T) {
	c, b := serve(t, DefaultConfig())
	if b.Info().Minor != 2 {
		t.Fatalf("info %+v: want protocol 1.2", b.Info())
	}
	runSpans(t, c, "spans-warm", "fanout", map[string]string{"branches": "8"})
	for _, cell := range []struct {
		scenario string
		opts     map[string]string
		runs     int
		bound    float64
	}{
		{"fanout", map[string]string{"branches": "8"}, 5, 0.15},
		{"sequential", map[string]string{"steps": "5", "body": "1ms"}, 2, 0.15},
		{"hook-step", nil, 1, 1}, // the driver's time before the resume is not the engine's
		{"step", nil, 2, 0.15},
	} {
		var unatt float64
		for i := range cell.runs {
			run := fmt.Sprintf("spans-%s-%d", cell.scenario, i)
			sent := b.now()
			evs := runSpans(t, c, run, cell.scenario, cell.opts)
			checkSpans(t, run, evs, sent, "activity task")
			segs, ttls, from := pathOf(evs, sent)
			if from == 0 {
				t.Errorf("%s: the last step's body span names no task", run)
			}
			sh := shares(segs, ttls)
			unatt += sh[metrics.CatUnattributed]
			var line []string
			for _, cd := range metrics.Categories {
				if v := sh[cd.Name]; v > 0 {
					line = append(line, fmt.Sprintf("%s %.0f%%", cd.Name, 100*v))
				}
			}
			t.Logf("%s: TTLS %v: %s", run, ttls.Round(10*time.Microsecond), strings.Join(line, ", "))
		}
		if mean := unatt / float64(cell.runs); mean > cell.bound {
			t.Errorf("%s: unattributed %.1f%% of TTLS on average, want under %.0f%%", cell.scenario, 100*mean, 100*cell.bound)
		}
	}
	ctx := context.Background()
	if _, err := c.Start(ctx, protocol.StartRequest{Run: "unasked", Scenario: "fanout", Options: map[string]string{"branches": "4"}}); err != nil {
		t.Fatal(err)
	}
	_, evs := follow(t, c, "unasked", false)
	for _, ev := range evs {
		if ev.Kind == protocol.EventSpan {
			t.Fatalf("span event %+v in a run whose start did not ask", ev)
		}
	}
}
