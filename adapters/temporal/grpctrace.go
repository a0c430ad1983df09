package main

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// The worker's side of each task, from its gRPC calls: when a task reached
// the worker (a poll's answer, or an eager activity handed back with a
// workflow task's completion) and when the worker's completion call went
// out. These are the adapter's own clock, like the step bodies; buildSpans
// puts them inside the history's tasks.

// tokenRef is a task the worker holds, by its task token.
type tokenRef struct {
	st *runState
	wk *workerTask
}

// traceCalls is the unary interceptor on the client's (and so the worker's)
// connection.
func (b *Backend) traceCalls(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := b.now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	end := b.now()
	switch r := reply.(type) {
	case *workflowservice.PollWorkflowTaskQueueResponse:
		b.noteWorkflowTask(r, end)
	case *workflowservice.PollActivityTaskQueueResponse:
		b.noteActivityTask(r, end)
	case *workflowservice.RespondWorkflowTaskCompletedResponse:
		if q, ok := req.(*workflowservice.RespondWorkflowTaskCompletedRequest); ok {
			b.noteRespond(q.GetTaskToken(), start, end)
		}
		for _, at := range r.GetActivityTasks() {
			b.noteActivityTask(at, end) // eager: handed back with the completion
		}
	case *workflowservice.RespondWorkflowTaskFailedResponse:
		if q, ok := req.(*workflowservice.RespondWorkflowTaskFailedRequest); ok {
			b.noteRespond(q.GetTaskToken(), start, end)
		}
	case *workflowservice.RespondActivityTaskCompletedResponse:
		if q, ok := req.(*workflowservice.RespondActivityTaskCompletedRequest); ok {
			b.noteRespond(q.GetTaskToken(), start, end)
		}
	case *workflowservice.RespondActivityTaskFailedResponse:
		if q, ok := req.(*workflowservice.RespondActivityTaskFailedRequest); ok {
			b.noteRespond(q.GetTaskToken(), start, end)
		}
	}
	return nil
}

// traced returns the state of the run workflow id wid belongs to while it
// is being traced (b.mu held).
func (b *Backend) traced(wid string) *runState {
	if !strings.HasPrefix(wid, workflowPrefix) {
		return nil
	}
	st := b.runs[strings.TrimPrefix(wid, workflowPrefix)]
	if st == nil || st.trace == nil || st.finishing {
		return nil
	}
	return st
}

func (b *Backend) noteWorkflowTask(r *workflowservice.PollWorkflowTaskQueueResponse, at int64) {
	if len(r.GetTaskToken()) == 0 {
		return // an empty poll
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.traced(r.GetWorkflowExecution().GetWorkflowId())
	if st == nil {
		return
	}
	wk := &workerTask{recv: at}
	st.trace.wt[r.GetStartedEventId()] = wk
	b.holdToken(st, r.GetTaskToken(), wk)
}

func (b *Backend) noteActivityTask(r *workflowservice.PollActivityTaskQueueResponse, at int64) {
	if len(r.GetTaskToken()) == 0 {
		return
	}
	var k attemptKey
	if _, err := fmt.Sscanf(r.GetActivityId(), "%d/%d", &k.stage, &k.index); err != nil {
		return
	}
	k.attempt = int(r.GetAttempt())
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.traced(r.GetWorkflowExecution().GetWorkflowId())
	if st == nil {
		return
	}
	wk := &workerTask{recv: at}
	st.trace.act[k] = wk
	b.holdToken(st, r.GetTaskToken(), wk)
}

func (b *Backend) holdToken(st *runState, token []byte, wk *workerTask) {
	t := string(token)
	b.tokens[t] = tokenRef{st: st, wk: wk}
	st.trace.tokens = append(st.trace.tokens, t)
}

// noteRespond records a completion call of the task token names.
func (b *Backend) noteRespond(token []byte, start, end int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref, ok := b.tokens[string(token)]
	if !ok {
		return
	}
	delete(b.tokens, string(token))
	if ref.st.finishing {
		return
	}
	ref.wk.respondStart, ref.wk.respondEnd = start, end
}
