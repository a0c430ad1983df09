package main

import (
	"context"
	"encoding/json"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/workflow"

	"github.com/durabench/durabench/protocol"
)

// Where a run's time went (protocol 1.2 span events), sent when the run's
// start asks for them, before its terminal event. go-workflows' history
// stamps its events (WorkflowExecutionStarted, WorkflowTaskStarted,
// ActivityScheduled, ActivityCompleted, …) but records neither when a task
// was dequeued nor when a write committed; the adapter already wraps the
// backend the worker and client use (observed), and times those calls
// there, on its own clock, per run:
//
//   - start: the start request reaching the adapter → the backend's
//     CreateWorkflowInstance returning (the instance and its first event
//     committed);
//   - each workflow task: its queue wait, from the write that made it (the
//     start, an activity's completion, a signal, or the previous workflow
//     task when events came in while it ran) to GetWorkflowTask returning
//     it; then the task: the worker's execution (compute: replay from the
//     executor cache, the workflow code) and CompleteWorkflowTask (write:
//     the new events and activity tasks committed);
//   - each activity: its queue wait, from the workflow task that scheduled
//     it committing to GetActivityTask returning it; then the task: the
//     body (the step events' times) and CompleteActivityTask (write).
//
// Every write and dequeue goes through sqlite's one connection, so a call
// may wait for it; that wait is not separated from the call (it is in the
// call's category).

// interval is [start, end] on the adapter's clock.
type interval struct{ start, end int64 }

// wtCall is one workflow task of a run as the backend saw it.
type wtCall struct {
	dequeued int64
	complete interval // CompleteWorkflowTask (0: not yet)
	// triggers are what its new events came from: activity schedule event
	// ids (completions), signals (their index), the start.
	acts    []int64
	signals int
	started bool
}

// actCall is one activity task (the last attempt of a step).
type actCall struct {
	wt       int // index of the workflow task that scheduled it (-1: unknown)
	dequeued int64
	body     interval
	complete interval
}

// runTrace is what the adapter measures of a run for its spans.
type runTrace struct {
	startReq, created int64
	wts               []*wtCall
	steps             map[stepKey]*actCall
	bySchedule        map[int64]stepKey // activity schedule event id -> step
	signals           []interval        // SignalWorkflow calls
}

func newRunTrace(startReq int64) *runTrace {
	return &runTrace{startReq: startReq, steps: map[stepKey]*actCall{}, bySchedule: map[int64]stepKey{}}
}

func (tr *runTrace) step(k stepKey) *actCall {
	c := tr.steps[k]
	if c == nil {
		c = &actCall{wt: -1}
		tr.steps[k] = c
	}
	return c
}

// traceOf is the trace of the run instance belongs to (a.mu held; nil when
// its spans were not asked for).
func (a *Adapter) traceOfLocked(instance string) *runTrace {
	st := a.runs[a.instances[instance]]
	if st == nil || st.done {
		return nil
	}
	return st.trace
}

// stepOf reads the step an ActivityScheduled event is (its StepInput).
func stepOf(e *history.Event) (stepKey, bool) {
	attr, ok := e.Attributes.(*history.ActivityScheduledAttributes)
	if !ok || len(attr.Inputs) == 0 {
		return stepKey{}, false
	}
	var in StepInput
	if err := json.Unmarshal(attr.Inputs[0], &in); err != nil {
		return stepKey{}, false
	}
	return stepKey{in.Stage, in.Index}, true
}

func (o *observed) CreateWorkflowInstance(ctx context.Context, instance *workflow.Instance, event *history.Event) error {
	err := o.Backend.CreateWorkflowInstance(ctx, instance, event)
	if err == nil {
		at := o.a.now()
		a := o.a
		a.mu.Lock()
		if tr := a.traceOfLocked(instance.InstanceID); tr != nil {
			tr.created = at
		}
		a.mu.Unlock()
	}
	return err
}

func (o *observed) GetWorkflowTask(ctx context.Context, queues []workflow.Queue) (*backend.WorkflowTask, error) {
	t, err := o.Backend.GetWorkflowTask(ctx, queues)
	if t == nil || err != nil {
		return t, err
	}
	at := o.a.now()
	a := o.a
	a.mu.Lock()
	defer a.mu.Unlock()
	tr := a.traceOfLocked(t.WorkflowInstance.InstanceID)
	if tr == nil {
		return t, err
	}
	wt := &wtCall{dequeued: at}
	for _, e := range t.NewEvents {
		switch e.Type {
		case history.EventType_WorkflowExecutionStarted:
			wt.started = true
		case history.EventType_ActivityCompleted, history.EventType_ActivityFailed:
			wt.acts = append(wt.acts, e.ScheduleEventID)
		case history.EventType_SignalReceived:
			wt.signals++
		}
	}
	tr.wts = append(tr.wts, wt)
	return t, err
}

// noteWorkflowTaskCompleted records a CompleteWorkflowTask of instance
// ([start, end]) and the activities it scheduled.
func (a *Adapter) noteWorkflowTaskCompleted(instance string, start, end int64, executed []*history.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tr := a.traceOfLocked(instance)
	if tr == nil || len(tr.wts) == 0 {
		return
	}
	i := len(tr.wts) - 1 // one workflow task of an instance at a time
	tr.wts[i].complete = interval{start, end}
	for _, e := range executed {
		if e.Type != history.EventType_ActivityScheduled {
			continue
		}
		if k, ok := stepOf(e); ok {
			tr.bySchedule[e.ScheduleEventID] = k
			tr.step(k).wt = i
		}
	}
}

func (o *observed) GetActivityTask(ctx context.Context, queues []workflow.Queue) (*backend.ActivityTask, error) {
	t, err := o.Backend.GetActivityTask(ctx, queues)
	if t == nil || err != nil {
		return t, err
	}
	at := o.a.now()
	if k, ok := stepOf(t.Event); ok {
		a := o.a
		a.mu.Lock()
		if tr := a.traceOfLocked(t.WorkflowInstance.InstanceID); tr != nil {
			c := tr.step(k)
			c.dequeued, c.body, c.complete = at, interval{}, interval{}
		}
		a.mu.Unlock()
	}
	return t, err
}

func (o *observed) CompleteActivityTask(ctx context.Context, task *backend.ActivityTask, result *history.Event) error {
	start := o.a.now()
	err := o.Backend.CompleteActivityTask(ctx, task, result)
	end := o.a.now()
	if err == nil {
		if k, ok := stepOf(task.Event); ok {
			a := o.a
			a.mu.Lock()
			if tr := a.traceOfLocked(task.WorkflowInstance.InstanceID); tr != nil {
				tr.step(k).complete = interval{start, end}
			}
			a.mu.Unlock()
		}
	}
	return err
}

func (o *observed) SignalWorkflow(ctx context.Context, instanceID string, event *history.Event) error {
	start := o.a.now()
	err := o.Backend.SignalWorkflow(ctx, instanceID, event)
	end := o.a.now()
	if err == nil {
		a := o.a
		a.mu.Lock()
		if tr := a.traceOfLocked(instanceID); tr != nil {
			tr.signals = append(tr.signals, interval{start, end})
		}
		a.mu.Unlock()
	}
	return err
}

// spanList is a run's spans, numbered as they are added.
type spanList = protocol.SpanList

// spanEnd is the end of l's span id.
func spanEnd(l spanList, id int64) int64 { return l[id-1].End }

// buildSpans returns the run's spans from its trace.
func buildSpans(tr *runTrace) []protocol.Event {
	var l spanList
	if tr.created == 0 {
		return nil
	}
	// The instance is committed inside CreateWorkflowInstance: its first
	// workflow task may be dequeued before the call returns.
	created := tr.created
	if len(tr.wts) > 0 && tr.wts[0].started {
		created = min(created, tr.wts[0].dequeued)
	}
	start := l.Add(protocol.Event{At: min(tr.startReq, created), End: created, Category: protocol.CatStart, Name: "CreateWorkflowInstance"})
	signals := make([]int64, len(tr.signals))
	for i, s := range tr.signals {
		signals[i] = l.Add(protocol.Event{At: s.start, End: s.end, Category: protocol.CatWrite, Name: "SignalWorkflow"})
	}
	// The activities' tasks first (workflow tasks follow them), then the
	// workflow tasks, then the activities' queue waits (after the workflow
	// task that scheduled them).
	actTask := map[stepKey]int64{}
	for k, c := range tr.steps {
		if c.dequeued == 0 || c.body.end == 0 {
			continue
		}
		end := max(c.complete.end, c.body.end)
		task := l.Add(protocol.Event{At: min(c.dequeued, c.body.start), End: end, Category: protocol.CatCompute, Name: "activity task", Stage: k.stage, Index: k.index})
		l.Add(protocol.Event{At: c.body.start, End: c.body.end, Category: protocol.CatBody, Name: "Step", Stage: k.stage, Index: k.index, Parent: task})
		if c.complete.end > c.body.end {
			l.Add(protocol.Event{At: max(c.complete.start, c.body.end), End: c.complete.end, Category: protocol.CatWrite, Name: "CompleteActivityTask",
				Stage: k.stage, Index: k.index, Parent: task})
		}
		actTask[k] = task
	}
	wtTask := make([]int64, len(tr.wts))
	signalsSeen := 0
	for i, wt := range tr.wts {
		// What made it: of its new events' writes and the previous
		// workflow task, the one that ended last at or before its dequeue.
		var after int64
		cand := func(id int64) {
			if id == 0 {
				return
			}
			e := spanEnd(l, id)
			if e > wt.dequeued {
				return
			}
			if after == 0 || e > spanEnd(l, after) {
				after = id
			}
		}
		if wt.started {
			cand(start)
		}
		for _, sid := range wt.acts {
			if k, ok := tr.bySchedule[sid]; ok {
				cand(actTask[k])
			}
		}
		for j := 0; j < wt.signals && signalsSeen < len(signals); j++ {
			cand(signals[signalsSeen])
			signalsSeen++
		}
		if i > 0 {
			cand(wtTask[i-1])
		}
		qStart := wt.dequeued
		if after != 0 {
			qStart = spanEnd(l, after)
		}
		q := l.Add(protocol.Event{At: qStart, End: wt.dequeued, Category: protocol.CatQueueWait, Name: "workflow task queue", After: after})
		if wt.complete.end == 0 {
			continue
		}
		wtTask[i] = l.Add(protocol.Event{At: wt.dequeued, End: wt.complete.end, Category: protocol.CatCompute, Name: "workflow task", After: q})
		l.Add(protocol.Event{At: max(wt.complete.start, wt.dequeued), End: wt.complete.end, Category: protocol.CatWrite, Name: "CompleteWorkflowTask", Parent: wtTask[i]})
	}
	for k, c := range tr.steps {
		task, ok := actTask[k]
		if !ok || c.wt < 0 || wtTask[c.wt] == 0 {
			continue
		}
		from := wtTask[c.wt]
		q := l.Add(protocol.Event{At: min(spanEnd(l, from), c.dequeued), End: c.dequeued, Category: protocol.CatQueueWait, Name: "activity task queue",
			Stage: k.stage, Index: k.index, After: from})
		l[task-1].After = q
	}
	return l
}

// eventsSink is a sink that records several events at once
// (protocol.Server's Events).
type eventsSink interface {
	Events(run string, evs []protocol.Event)
}
