package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cschleiden/go-workflows/workflow"
	"github.com/durabench/durabench/protocol"
)

// RunInput is the input of the one workflow the adapter registers: which
// scenario shape to run and with what sizes. It is go-workflows' own JSON
// payload, stored in the instance's history like any workflow input.
type RunInput struct {
	Run      string        `json:"run"`
	Scenario string        `json:"scenario"`
	Count    int           `json:"count,omitempty"` // fanout branches / sequential steps
	Body     time.Duration `json:"body,omitempty"`
	Token    string        `json:"token,omitempty"` // hook-step's hook token
}

// StepInput is the input of the step activity: the step it is and how long
// its body sleeps.
type StepInput struct {
	Run   string        `json:"run"`
	Stage int           `json:"stage"`
	Index int           `json:"index"`
	Body  time.Duration `json:"body,omitempty"`
}

// hookSignal is the signal name a hook-step run waits on.
const hookSignal = "durabench-hook"

// Scenario is the workflow: every scenario of the book the adapter serves is
// one shape of it.
//
//   - fanout: Count activities scheduled at once (stage 0, index i), then
//     every future awaited;
//   - sequential, step: Count activities one after another (stage i, index 0);
//   - hook-step: a signal channel received once (the hook, stage 0), then
//     one activity (stage 1, index 0).
//
// Activities use go-workflows' default activity options (its default retry
// policy), as a user's workflow would.
func (a *Adapter) Scenario(ctx workflow.Context, in RunInput) error {
	opts := workflow.DefaultActivityOptions
	switch in.Scenario {
	case "fanout":
		fs := make([]workflow.Future[any], in.Count)
		for i := range fs {
			fs[i] = workflow.ExecuteActivity[any](ctx, opts, a.acts.Step, StepInput{Run: in.Run, Stage: 0, Index: i, Body: in.Body})
		}
		for i, f := range fs {
			if _, err := f.Get(ctx); err != nil {
				return fmt.Errorf("step 0.%d: %w", i, err)
			}
		}
	case "sequential", "step":
		for i := range in.Count {
			f := workflow.ExecuteActivity[any](ctx, opts, a.acts.Step, StepInput{Run: in.Run, Stage: i, Index: 0, Body: in.Body})
			if _, err := f.Get(ctx); err != nil {
				return fmt.Errorf("step %d.0: %w", i, err)
			}
		}
	case "hook-step":
		ch := workflow.NewSignalChannel[[]byte](ctx, hookSignal)
		// Reported only on the first execution, not on a replay: the run
		// now waits, and a signal sent from here on is delivered.
		if !workflow.Replaying(ctx) {
			a.hookEvent(in.Run, protocol.EventHookWaiting, in.Token)
		}
		if _, ok := ch.Receive(ctx); !ok {
			return fmt.Errorf("hook %s: signal channel closed", in.Token)
		}
		if !workflow.Replaying(ctx) {
			a.hookEvent(in.Run, protocol.EventHookReceived, in.Token)
		}
		f := workflow.ExecuteActivity[any](ctx, opts, a.acts.Step, StepInput{Run: in.Run, Stage: 1, Index: 0, Body: in.Body})
		if _, err := f.Get(ctx); err != nil {
			return fmt.Errorf("step 1.0: %w", err)
		}
	default:
		return fmt.Errorf("unknown scenario %q", in.Scenario)
	}
	return nil
}

// activities holds the step activity (go-workflows registers a struct's
// exported methods by name).
type activities struct{ a *Adapter }

// Step is a step body: it reports its start, sleeps its body, and reports
// its completion, on the adapter's clock (source "worker": go-workflows'
// history has no activity-started event).
func (acts *activities) Step(ctx context.Context, in StepInput) error {
	a := acts.a
	attempt, ok := a.stepStarted(in)
	if !ok {
		return nil // not a run of this adapter's (its run is over or unknown)
	}
	if in.Body > 0 {
		t := time.NewTimer(in.Body)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			a.stepFailed(in, attempt, ctx.Err())
			return ctx.Err()
		}
	}
	a.stepCompleted(in, attempt)
	return nil
}
