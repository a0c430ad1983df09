package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/durabench/durabench/protocol"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// workflow is the one workflow every scenario runs; the scenario picks its
// shape:
//
//	fanout      N activities scheduled at once (stage 0, index 0…N−1), then wait for all
//	sequential  N activities one after another (stage i, index 0)
//	step        one activity (stage 0, index 0)
//	hook-step   wait for the resume signal (the hook, stage 0), then one activity (stage 1, index 0)
//
// Every activity's id is "stage/index", which is how the worker
// interceptor names the step it starts. The workflow reports the hook
// events itself, only while not replaying (a replay after a sticky-cache
// eviction re-runs the code, not the events).
func (b *Backend) workflow(ctx workflow.Context, in runInput) error {
	run := strings.TrimPrefix(workflow.GetInfo(ctx).WorkflowExecution.ID, workflowPrefix)
	err := b.runScenario(ctx, run, in)
	if !workflow.IsReplaying(ctx) {
		b.closing(run) // the backend watches for the close this task makes
	}
	return err
}

func (b *Backend) runScenario(ctx workflow.Context, run string, in runInput) error {
	step := func(stage, index int) workflow.Future {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ActivityID:          fmt.Sprintf("%d/%d", stage, index),
			StartToCloseTimeout: in.Body + time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second},
		})
		return workflow.ExecuteActivity(actx, activityName, in.Body)
	}
	switch in.Scenario {
	case "fanout":
		fs := make([]workflow.Future, in.Branches)
		for i := range fs {
			fs[i] = step(0, i)
		}
		for _, f := range fs {
			if err := f.Get(ctx, nil); err != nil {
				return err
			}
		}
	case "sequential":
		for i := range in.Steps {
			if err := step(i, 0).Get(ctx, nil); err != nil {
				return err
			}
		}
	case "step":
		return step(0, 0).Get(ctx, nil)
	case "hook-step":
		if !workflow.IsReplaying(ctx) {
			b.emit(run, protocol.Event{Kind: protocol.EventHookWaiting, At: b.now(), Source: protocol.SourceWorker, Token: in.Token})
		}
		var payload []byte
		workflow.GetSignalChannel(ctx, signalName).Receive(ctx, &payload)
		if !workflow.IsReplaying(ctx) {
			b.emit(run, protocol.Event{Kind: protocol.EventHookReceived, At: b.now(), Source: protocol.SourceWorker, Token: in.Token})
		}
		return step(1, 0).Get(ctx, nil)
	default:
		return temporal.NewNonRetryableApplicationError("unknown scenario "+in.Scenario, "durabench", nil)
	}
	return nil
}

// stepBody is every step's body: it sleeps for the scenario's body
// duration (0: returns at once).
func stepBody(ctx context.Context, body time.Duration) error {
	if body <= 0 {
		return nil
	}
	t := time.NewTimer(body)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stepInterceptor is the worker interceptor that takes each step's start
// and end around the activity body, in the worker process, on the adapter's
// clock (source "sdk"): Temporal's history has ActivityTaskStarted only
// once the activity finished, with the server's time.
type stepInterceptor struct {
	interceptor.WorkerInterceptorBase
	b *Backend
}

func (i *stepInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &stepActivity{b: i.b}
	a.Next = next
	return a
}

type stepActivity struct {
	interceptor.ActivityInboundInterceptorBase
	b *Backend
}

func (a *stepActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := a.b.now()
	info := activity.GetInfo(ctx)
	run := strings.TrimPrefix(info.WorkflowExecution.ID, workflowPrefix)
	var stage, index int
	if _, err := fmt.Sscanf(info.ActivityID, "%d/%d", &stage, &index); err != nil {
		return a.Next.ExecuteActivity(ctx, in) // not a durabench step
	}
	ev := protocol.Event{Stage: stage, Index: index, Attempt: int(info.Attempt), Source: protocol.SourceSDK}
	ev.Kind, ev.At = protocol.EventStepStarted, start
	a.b.emit(run, ev)
	res, err := a.Next.ExecuteActivity(ctx, in)
	ev.At = a.b.now()
	a.b.noteBody(run, attemptKey{stage, index, int(info.Attempt)}, start, ev.At)
	ev.Kind = protocol.EventStepCompleted
	if err != nil {
		ev.Kind, ev.Error = protocol.EventStepFailed, err.Error()
	}
	a.b.emit(run, ev)
	return res, err
}

// noteBody records a step body's interval for the run's spans.
func (b *Backend) noteBody(run string, k attemptKey, start, end int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.runs[run]; st != nil && st.trace != nil && !st.finishing {
		st.trace.bodies[k] = interval{start, end}
	}
}
