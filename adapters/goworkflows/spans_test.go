package main

import (
	"context"
	"testing"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/spancheck"
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
	spancheck.Cells(t, []spancheck.Cell{
		{Scenario: "fanout", Opts: map[string]string{"branches": "8"}, Runs: 5, Bound: 0.15},
		{Scenario: "sequential", Opts: map[string]string{"steps": "5", "body": "1ms"}, Runs: 2, Bound: 0.15},
		// The driver's time before the resume is not the engine's.
		{Scenario: "hook-step", Runs: 1, Bound: 1},
		{Scenario: "step", Runs: 2, Bound: 0.15},
	}, "activity task", b.now, func(id, scenario string, opts map[string]string) []protocol.Event {
		return runSpans(t, c, id, scenario, opts)
	})
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
