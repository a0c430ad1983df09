package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// dieOnce fails the first step_completed of one step, as an orchestrator
// that dies while it runs that (inline) step: the step is created and
// claimed, it has no queue message, and the activation fails.
type dieOnce struct {
	world.World
	step  string
	fired atomic.Bool
}

var errCrash = errors.New("injected crash")

func (d *dieOnce) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	if ev.Kind == world.StepCompleted && ev.Entity == d.step && d.fired.CompareAndSwap(false, true) {
		return world.AppendResult{}, errCrash
	}
	return d.World.Append(ctx, run, ev, pre)
}

// TestRedeliveredActivationRepublishesUnfinishedSteps: when the activation
// that ran a stage's inline step dies, its redelivery must hand the step to
// the queue again, or the run never completes.
func TestRedeliveredActivationRepublishesUnfinishedSteps(t *testing.T) {
	for _, v := range engine.Versions() {
		t.Run(v.Name, func(t *testing.T) {
			w := &dieOnce{World: mem.New(world.Options{}), step: "0.0"}
			h := start(t, w, v.Features)
			p := engine.FanOut(8)
			h.run(t, "r", p)
			if !w.fired.Load() {
				t.Fatal("the crash was never injected")
			}
			if got := h.e.Stats().Republished; got < 1 {
				t.Errorf("Republished = %d, want the inline step handed to the queue", got)
			}
			events, _ := w.Load(context.Background(), "r")
			done := map[string]int{}
			for _, ev := range events {
				if ev.Kind == world.StepCompleted {
					done[ev.Entity]++
				}
			}
			if len(done) != 8 || done["0.0"] != 1 {
				t.Errorf("completions %v", done)
			}
		})
	}
}
