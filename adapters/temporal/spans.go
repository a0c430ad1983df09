package main

import (
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/durabench/durabench/protocol"
)

// Where a run's time went (protocol 1.2 span events): each run's spans are
// built from its workflow history, read when the run closes (before its
// terminal event is sent), and from what the worker measured itself — the
// step bodies (the activity interceptor) and, through a gRPC interceptor on
// the worker's connection, when each task reached the worker and when it
// sent each completion. README.md ("Spans") lists them.
//
// The history's event times are the server's wall clock. They are put on
// the adapter's clock (monotonic ns since the backend was made) with one
// offset taken when the backend was made: the wall-clock reading of the
// instant the monotonic clock starts (Backend.epoch holds both). The
// in-process server runs on this machine's clock; an external server's
// history is converted as if its clock were this machine's (as good as the
// two machines' clock sync).

// attemptKey names one execution of a step.
type attemptKey struct{ stage, index, attempt int }

// interval is [start, end] on the adapter's clock.
type interval struct{ start, end int64 }

// workerTask is what the worker saw of one task: when it reached the worker
// (a poll's answer, or an eager activity handed back with a workflow task's
// completion) and the worker's completion call.
type workerTask struct {
	recv         int64
	respondStart int64
	respondEnd   int64
}

// runTrace is what the adapter measured of one run besides its history.
type runTrace struct {
	// startReq is when the start request reached the backend.
	startReq int64
	// bodies are the step bodies by execution (the interceptor's step
	// events).
	bodies map[attemptKey]interval
	// resumes are the times of the resume calls that reached the server,
	// in order.
	resumes []int64
	// wt are the workflow tasks the worker ran, by their started event id;
	// act the activity tasks, by execution.
	wt  map[int64]*workerTask
	act map[attemptKey]*workerTask
	// tokens are this run's task tokens in Backend.tokens.
	tokens []string
}

func newRunTrace(startReq int64) *runTrace {
	return &runTrace{startReq: startReq, bodies: map[attemptKey]interval{},
		wt: map[int64]*workerTask{}, act: map[attemptKey]*workerTask{}}
}

// spanBuilder turns one run's history and trace into span events.
type spanBuilder struct {
	wall  func(t time.Time) int64 // a history time on the adapter's clock
	tr    *runTrace
	spans []protocol.Event
}

func (sb *spanBuilder) add(ev protocol.Event) int64 {
	ev.Kind, ev.Source = protocol.EventSpan, protocol.SourceHistory
	if ev.End < ev.At {
		ev.End = ev.At
	}
	ev.Wait = min(max(ev.Wait, 0), ev.End-ev.At)
	ev.SpanID = int64(len(sb.spans) + 1)
	sb.spans = append(sb.spans, ev)
	return ev.SpanID
}

// get returns span id's event (id ≥ 1).
func (sb *spanBuilder) get(id int64) *protocol.Event { return &sb.spans[id-1] }

// child adds a span inside parent, clipped to it; a span that is empty
// after clipping is left out.
func (sb *spanBuilder) child(parent int64, ev protocol.Event) {
	p := sb.get(parent)
	if p.At > ev.At {
		ev.Wait -= p.At - ev.At // the wait is from the span's start
	}
	ev.At, ev.End = max(ev.At, p.At), min(ev.End, p.End)
	if ev.End <= ev.At {
		return
	}
	ev.Parent = parent
	sb.add(ev)
}

// wtRec is a workflow task as the history has it.
type wtRec struct {
	scheduled, started, completed int64 // event ids (0: not yet)
	schedAt, startAt, endAt       int64
	endName                       string
	queue, task                   int64 // span ids
	lastCommand                   int64 // the latest time of an event its completion made
}

// actRec is an activity as the history has it (its last attempt).
type actRec struct {
	key                     attemptKey
	schedAt, startAt, endAt int64
	wtCompleted             int64 // the WorkflowTaskCompleted event id that scheduled it
	started, ended          bool
	endName                 string
	task                    int64 // span id of its task
}

// buildSpans returns the run's spans from its history (events in id order)
// and trace. Spans are linked so that the critical-path walk follows the
// run's happens-before: an activity's task after its queue wait
// (ActivityTaskScheduled → Started), which is after the workflow task whose
// completion scheduled it, which is after its own queue wait
// (WorkflowTaskScheduled → Started), which is after what triggered it (the
// run's start, an activity's completion, a signal, or the previous
// workflow task when events arrived while it ran).
func buildSpans(hist []*historypb.HistoryEvent, tr *runTrace, wall func(time.Time) int64) []protocol.Event {
	sb := &spanBuilder{wall: wall, tr: tr}
	at := func(e *historypb.HistoryEvent) int64 { return wall(e.GetEventTime().AsTime()) }
	// Every event's time, sorted: behindOthers reads them.
	stamps := make([]int64, 0, len(hist))
	for _, e := range hist {
		stamps = append(stamps, at(e))
	}
	slices.Sort(stamps)
	// behindOthers is how long a request of the run the worker sent at
	// sent, whose event the server stamped at stamp, demonstrably waited
	// behind the run's other updates: the server applies one run's
	// updates one at a time (they hold its mutable state's lock while
	// they are applied and written), and an event of another update
	// stamped after sent was applied ahead of this one. A lower bound:
	// that update's own write after its stamp is not counted.
	behindOthers := func(sent, stamp int64) int64 {
		i, _ := slices.BinarySearch(stamps, stamp) // stamps[i-1] < stamp
		if i > 0 && stamps[i-1] > sent {
			return stamps[i-1] - sent
		}
		return 0
	}
	wts := map[int64]*wtRec{} // by scheduled event id
	wtByStarted := map[int64]*wtRec{}
	wtByCompleted := map[int64]*wtRec{}
	acts := map[int64]*actRec{} // by scheduled event id
	var wtOrder []*wtRec
	var actOrder []*actRec
	// triggers: the events that make a workflow task (by event id), each
	// with the span it ends; resolved after every span exists.
	type trig struct {
		id   int64
		kind enumspb.EventType
		at   int64
		ref  int64 // scheduled event id (activity, workflow task)
	}
	var trigs []trig
	var startedAt int64
	var signals []int64 // WorkflowExecutionSignaled times
	for _, e := range hist {
		t := at(e)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			startedAt = t
			trigs = append(trigs, trig{id: e.GetEventId(), kind: e.GetEventType(), at: t})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			signals = append(signals, t)
			trigs = append(trigs, trig{id: e.GetEventId(), kind: e.GetEventType(), at: t, ref: int64(len(signals) - 1)})
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			w := &wtRec{scheduled: e.GetEventId(), schedAt: t}
			wts[w.scheduled] = w
			wtOrder = append(wtOrder, w)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if w := wts[e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]; w != nil {
				w.started, w.startAt = e.GetEventId(), t
				wtByStarted[w.started] = w
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			var sched int64
			switch a := e.GetAttributes().(type) {
			case *historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes:
				sched = a.WorkflowTaskCompletedEventAttributes.GetScheduledEventId()
			case *historypb.HistoryEvent_WorkflowTaskFailedEventAttributes:
				sched = a.WorkflowTaskFailedEventAttributes.GetScheduledEventId()
			case *historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes:
				sched = a.WorkflowTaskTimedOutEventAttributes.GetScheduledEventId()
			}
			if w := wts[sched]; w != nil {
				w.completed, w.endAt, w.lastCommand = e.GetEventId(), t, t
				w.endName = e.GetEventType().String()
				wtByCompleted[w.completed] = w
				trigs = append(trigs, trig{id: e.GetEventId(), kind: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, at: t, ref: sched})
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := e.GetActivityTaskScheduledEventAttributes()
			r := &actRec{schedAt: t, wtCompleted: a.GetWorkflowTaskCompletedEventId()}
			if _, err := fmt.Sscanf(a.GetActivityId(), "%d/%d", &r.key.stage, &r.key.index); err != nil {
				r.key.stage, r.key.index = -1, -1
			}
			acts[e.GetEventId()] = r
			actOrder = append(actOrder, r)
			if w := wtByCompleted[r.wtCompleted]; w != nil {
				w.lastCommand = max(w.lastCommand, t)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// Written into the history only when the attempt ended, but with
			// the time it started.
			a := e.GetActivityTaskStartedEventAttributes()
			if r := acts[a.GetScheduledEventId()]; r != nil {
				r.started, r.startAt, r.key.attempt = true, t, int(a.GetAttempt())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			var sched int64
			switch a := e.GetAttributes().(type) {
			case *historypb.HistoryEvent_ActivityTaskCompletedEventAttributes:
				sched = a.ActivityTaskCompletedEventAttributes.GetScheduledEventId()
			case *historypb.HistoryEvent_ActivityTaskFailedEventAttributes:
				sched = a.ActivityTaskFailedEventAttributes.GetScheduledEventId()
			case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
				sched = a.ActivityTaskTimedOutEventAttributes.GetScheduledEventId()
			case *historypb.HistoryEvent_ActivityTaskCanceledEventAttributes:
				sched = a.ActivityTaskCanceledEventAttributes.GetScheduledEventId()
			}
			if r := acts[sched]; r != nil {
				r.ended, r.endAt, r.endName = true, t, e.GetEventType().String()
				trigs = append(trigs, trig{id: e.GetEventId(), kind: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, at: t, ref: sched})
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			var wtc int64
			switch a := e.GetAttributes().(type) {
			case *historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes:
				wtc = a.WorkflowExecutionCompletedEventAttributes.GetWorkflowTaskCompletedEventId()
			case *historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes:
				wtc = a.WorkflowExecutionFailedEventAttributes.GetWorkflowTaskCompletedEventId()
			case *historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes:
				wtc = a.WorkflowExecutionContinuedAsNewEventAttributes.GetWorkflowTaskCompletedEventId()
			}
			if w := wtByCompleted[wtc]; w != nil {
				w.lastCommand = max(w.lastCommand, t)
			}
		}
	}

	// The run's start: from the start request reaching the adapter to its
	// first workflow task scheduled (the server created the run and queued
	// its first task; both are written in one transaction).
	var startSpan int64
	if startedAt != 0 {
		end := startedAt
		if len(wtOrder) > 0 {
			end = max(end, wtOrder[0].schedAt)
		}
		begin := startedAt
		if tr.startReq != 0 && tr.startReq < begin {
			begin = tr.startReq
		}
		startSpan = sb.add(protocol.Event{At: begin, End: end, Category: protocol.CatStart, Name: "StartWorkflowExecution"})
	}
	// Signals: from the resume call to the server recording the signal.
	signalSpans := make([]int64, len(signals))
	for i, g := range signals {
		begin := g
		if i < len(tr.resumes) && tr.resumes[i] < g {
			begin = tr.resumes[i]
		}
		signalSpans[i] = sb.add(protocol.Event{At: begin, End: g, Category: protocol.CatWrite, Name: "SignalWorkflowExecution"})
	}

	// Workflow tasks: the queue wait, then the task (the worker's replay
	// and decisions; the server's handling of its completion up to the
	// last event it wrote). The queue waits' After is set below.
	for _, w := range wtOrder {
		if w.started == 0 {
			continue
		}
		w.queue = sb.add(protocol.Event{At: w.schedAt, End: w.startAt, Category: protocol.CatQueueWait, Name: "WorkflowTaskScheduled→Started"})
		if w.completed == 0 {
			continue
		}
		w.task = sb.add(protocol.Event{At: w.startAt, End: max(w.endAt, w.lastCommand), Category: protocol.CatCompute,
			Name: "WorkflowTask", After: w.queue})
		if wk := tr.wt[w.started]; wk != nil {
			if wk.recv != 0 {
				// The server recording the task started (a write of the
				// run's state) and the poll's answer reaching the worker.
				sb.child(w.task, protocol.Event{At: w.startAt, End: wk.recv, Category: protocol.CatWrite, Name: "WorkflowTaskStarted→worker"})
			}
			if wk.respondStart != 0 {
				sb.child(w.task, protocol.Event{At: wk.respondStart, End: w.endAt, Category: protocol.CatWrite, Name: "RespondWorkflowTaskCompleted",
					Wait: behindOthers(wk.respondStart, w.endAt)})
			}
		}
	}

	// Activities: the queue wait after the workflow task that scheduled it,
	// then its task (the last attempt): delivery to the worker, the body,
	// the completion's report.
	for _, r := range actOrder {
		if !r.started {
			continue
		}
		var after int64
		if w := wtByCompleted[r.wtCompleted]; w != nil {
			after = w.task
		}
		step := func(ev protocol.Event) protocol.Event {
			if r.key.stage >= 0 {
				ev.Stage, ev.Index = r.key.stage, r.key.index
			}
			return ev
		}
		q := sb.add(step(protocol.Event{At: r.schedAt, End: r.startAt, Category: protocol.CatQueueWait, Name: "ActivityTaskScheduled→Started", After: after}))
		if !r.ended {
			continue
		}
		body, hasBody := tr.bodies[r.key]
		begin, end := r.startAt, r.endAt
		if hasBody {
			// The body is the worker's own measurement (monotonic); the
			// task around it is the server's. Should the clocks disagree,
			// the task is widened to hold its body.
			begin, end = min(begin, body.start), max(end, body.end)
		}
		r.task = sb.add(step(protocol.Event{At: begin, End: end, Category: protocol.CatCompute, Name: "ActivityTask", After: q}))
		wk := tr.act[r.key]
		if wk != nil && wk.recv != 0 {
			// The server recording the attempt started and answering the
			// poll (or, eager, finishing the workflow task's completion
			// that carries it): a write of the run's state and the answer.
			sb.child(r.task, step(protocol.Event{At: r.startAt, End: wk.recv, Category: protocol.CatWrite, Name: "ActivityTaskStarted→worker"}))
		}
		if hasBody {
			b := step(protocol.Event{At: body.start, End: body.end, Category: protocol.CatBody, Name: "activity " + activityName, Parent: r.task})
			sb.add(b) // exactly the step's events' times, never clipped
			// The completion's report: from the worker's call (else the
			// body's end) to the server stamping ActivityTaskCompleted,
			// its wait behind the run's other updates as contention.
			report, wait := body.end, int64(0)
			if wk != nil && wk.respondStart >= body.end {
				report, wait = wk.respondStart, behindOthers(wk.respondStart, r.endAt)
			}
			sb.child(r.task, step(protocol.Event{At: report, End: r.endAt, Category: protocol.CatWrite, Name: "RespondActivityTaskCompleted", Wait: wait}))
		}
	}

	// Each workflow task's queue wait happens after what made it: of the
	// events the previous workflow task did not see (after its started
	// event) up to this one's scheduling, the one whose span ended last
	// at or before the scheduling.
	slices.SortFunc(trigs, func(a, b trig) int { return int(a.id - b.id) })
	var prevStarted int64
	next := 0 // trigs before it are behind every window still to come
	for _, w := range wtOrder {
		var best int64
		var bestEnd int64
		for next < len(trigs) && trigs[next].id <= prevStarted {
			next++
		}
		for _, tg := range trigs[next:] {
			if tg.id >= w.scheduled {
				break
			}
			var id int64
			switch tg.kind {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				id = startSpan
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				id = signalSpans[tg.ref]
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				if p := wts[tg.ref]; p != nil {
					id = p.task
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				if r := acts[tg.ref]; r != nil {
					id = r.task
				}
			}
			if id == 0 {
				continue
			}
			// The latest to end at or before the scheduling; failing that
			// (clocks that disagree), the earliest.
			end := sb.get(id).End
			switch {
			case best == 0,
				end <= w.schedAt && (end > bestEnd || bestEnd > w.schedAt),
				end > w.schedAt && bestEnd > w.schedAt && end < bestEnd:
				best, bestEnd = id, end
			}
		}
		if w.queue != 0 {
			sb.get(w.queue).After = best
		}
		if w.started != 0 {
			prevStarted = w.started
		}
	}
	return sb.spans
}
