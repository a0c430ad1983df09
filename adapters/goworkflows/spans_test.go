package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/spancheck"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

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
			spancheck.Check(t, run, evs, sent, "activity task")
			segs, ttls, from := spancheck.Path(evs, sent)
			if from == 0 {
				t.Errorf("%s: the last step's body span names no task", run)
			}
			sh := spancheck.Shares(segs, ttls)
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
