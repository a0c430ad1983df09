package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// failPublishOnce fails the first publish of one message, after which the
// activation that dispatched it has created steps it never published.
type failPublishOnce struct {
	world.World
	id    string
	fired atomic.Bool
}

func (f *failPublishOnce) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	if m.ID == f.id && f.fired.CompareAndSwap(false, true) {
		return false, errCrash
	}
	return f.World.Publish(ctx, m, opt)
}

// TestFailedDispatchIsRepublished: a step publish fails in the first stage
// (the orchestrator's delivery is retried) and in the second (the last
// completer's inline continuation fails and hands the run to the queue).
// Either way the retried activation publishes the steps the failed one
// created, and the run completes with every step once.
func TestFailedDispatchIsRepublished(t *testing.T) {
	p := engine.Program{Stages: []engine.Stage{{Kind: engine.StageSteps, Steps: 4}, {Kind: engine.StageSteps, Steps: 4}}}
	for _, v := range engine.Versions() {
		for _, step := range []string{"0.2", "1.2"} {
			t.Run(v.Name+"/"+step, func(t *testing.T) {
				w := &failPublishOnce{World: mem.New(world.Options{}), id: "step/r/" + step}
				h := start(t, w, v.Features)
				h.run(t, "r", p)
				if !w.fired.Load() {
					t.Fatal("the publish failure was never injected")
				}
				h.checkExactlyOnce(t, "r", p)
			})
		}
	}
}

// lostAnswer commits each run's terminal event and then answers with a
// transient error, as a connection reset after the commit does: the writer
// cannot tell whether its write landed.
type lostAnswer struct {
	world.World
	fired sync.Map // run -> true once its answer was lost
}

func (l *lostAnswer) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	res, err := l.World.Append(ctx, run, ev, pre)
	if err == nil && ev.Kind.RunTerminal() {
		if _, lost := l.fired.LoadOrStore(run, true); !lost {
			return world.AppendResult{}, fmt.Errorf("connection reset after the commit: %w", world.ErrTransient)
		}
	}
	return res, err
}

// TestTerminalWriteAnswerLost: a run whose run_completed landed but whose
// writer saw a transient error is still reported finished (by the
// redelivery that finds it finished): before, every later delivery saw a
// finished run and nobody reported it, so the driver counted a completed
// run as unfinished at the cell timeout (make chaos, docs/reliability.md).
func TestTerminalWriteAnswerLost(t *testing.T) {
	for _, v := range engine.Versions() {
		t.Run(v.Name, func(t *testing.T) {
			w := &lostAnswer{World: mem.New(world.Options{})}
			h := start(t, w, v.Features)
			for _, p := range []engine.Program{engine.FanOut(8), engine.Sequence(3)} {
				id := fmt.Sprintf("r%d", p.StepCount())
				h.run(t, id, p) // fails the test when the run is never reported finished
				if _, lost := w.fired.Load(id); !lost {
					t.Fatalf("%s: the lost answer was never injected", id)
				}
				h.checkExactlyOnce(t, id, p)
			}
		})
	}
}
