package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/durabench/durabench/protocol"
)

// Where a run's time went (protocol 1.2 span events), from what DBOS
// records of the run and what the adapter measures itself, sent when the
// run's start asks for them, before its terminal event:
//
//   - start: the start request reaching the adapter → the workflow function
//     beginning (RunWorkflow: the workflow_status row, then the workflow's
//     goroutine);
//   - the workflow: from its function beginning to the run's end, a task
//     whose own time is compute (the workflow goroutine starting the steps,
//     and the Go scheduler running them on a busy machine);
//   - each step a task: from the step's start as DBOS recorded it
//     (operation_outputs.started_at_epoch_ms: taken before DBOS's check of
//     the step's recorded output, stored in whole milliseconds) — or, in a
//     chain, from the previous step's RunAsStep returning — to its body's
//     end, or for a RunAsStep step to its return after DBOS committed its
//     output. In it: CheckOperationExecution (run_read: the step's start to
//     its body's start), the body (the adapter's own times, the step's
//     events'), RecordOperationResult (write: the body's end to RunAsStep's
//     return).
//
// A step of a fan-out (dbos.Go) happens after the workflow started it; a
// step of a chain after the previous step's task. Not recorded by DBOS and
// not measured: a fan-out step's own output commit (after its body: not on
// the path to the last step's end) and what happens between a hook's
// waiting and its resume (the driver's time): left unattributed.
//
// DBOS's times are this process's wall clock (time.Now() in DBOS) in whole
// milliseconds, put on the adapter's clock with the offset of its epoch
// (the wall reading of the instant the monotonic clock starts): a step's
// recorded start may be up to 1 ms earlier than it was, which moves up to
// 1 ms from the workflow's compute to the step's check.

type interval struct{ start, end int64 }

// runTrace is what the adapter measures of a run for its spans.
type runTrace struct {
	startReq, runStarted int64
	bodies               map[[2]int]interval
	returned             map[[2]int]int64 // RunAsStep returned (a stage of one step)
}

func newRunTrace(startReq int64) *runTrace {
	return &runTrace{startReq: startReq, bodies: map[[2]int]interval{}, returned: map[[2]int]int64{}}
}

// spanList is a run's spans, numbered as they are added.
type spanList = protocol.SpanList

// buildSpans returns the run's spans from DBOS's records of its steps and
// the adapter's trace; end is the run's end (adapter clock).
func buildSpans(steps []dbos.StepInfo, tr *runTrace, wall func(time.Time) int64, end int64) []protocol.Event {
	var l spanList
	if tr.runStarted == 0 {
		return nil
	}
	start := l.Add(protocol.Event{At: min(tr.startReq, tr.runStarted), End: tr.runStarted, Category: protocol.CatStart, Name: "RunWorkflow"})
	wf := l.Add(protocol.Event{At: tr.runStarted, End: max(end, tr.runStarted), Category: protocol.CatCompute, Name: "workflow", After: start})
	type op struct {
		stage, index int
		started      int64
	}
	byStage := map[int][]op{}
	for _, s := range steps {
		var o op
		if _, err := fmt.Sscanf(s.StepName, "step-%d.%d", &o.stage, &o.index); err != nil || s.StartedAt.IsZero() {
			continue // DBOS's own operations (a hook's recv)
		}
		o.started = wall(s.StartedAt)
		byStage[o.stage] = append(byStage[o.stage], o)
	}
	stages := make([]int, 0, len(byStage))
	for st := range byStage {
		stages = append(stages, st)
	}
	slices.Sort(stages)
	var prev int64 = wf // what the next stage's steps happen after
	var prevEnd int64 = tr.runStarted
	for i, st := range stages {
		if i > 0 && stages[i-1] != st-1 || i == 0 && st != 0 {
			// A stage between (a hook): what it waited for is not the
			// engine's; the next steps follow nothing known.
			prev, prevEnd = 0, tr.runStarted
		}
		var last int64
		for _, o := range byStage[st] {
			k := [2]int{o.stage, o.index}
			body, ok := tr.bodies[k]
			if !ok {
				continue
			}
			begin := min(max(o.started, prevEnd), body.start)
			taskEnd := body.end
			ret, single := tr.returned[k]
			if single && len(byStage[st]) == 1 {
				taskEnd = max(ret, body.end)
			}
			task := l.Add(protocol.Event{At: begin, End: taskEnd, Category: protocol.CatCompute, Name: "step", Stage: o.stage, Index: o.index, After: prev})
			if body.start > begin {
				l.Add(protocol.Event{At: begin, End: body.start, Category: protocol.CatRunRead, Name: "CheckOperationExecution", Stage: o.stage, Index: o.index, Parent: task})
			}
			l.Add(protocol.Event{At: body.start, End: body.end, Category: protocol.CatBody, Name: "step body", Stage: o.stage, Index: o.index, Parent: task})
			if taskEnd > body.end {
				l.Add(protocol.Event{At: body.end, End: taskEnd, Category: protocol.CatWrite, Name: "RecordOperationResult", Stage: o.stage, Index: o.index, Parent: task})
			}
			last = task
			if len(byStage[st]) == 1 {
				prevEnd = taskEnd
			}
		}
		if len(byStage[st]) == 1 && last != 0 {
			prev = last
		} else {
			// After a fan-out stage: its steps' commits are not known.
			prev, prevEnd = 0, tr.runStarted
		}
	}
	return l
}

// note records into run's trace, if its spans were asked for.
func (b *Backend) note(run string, f func(tr *runTrace)) {
	b.mu.Lock()
	rs := b.runs[run]
	b.mu.Unlock()
	if rs == nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.trace != nil {
		f(rs.trace)
	}
}

// wall puts a wall-clock time (DBOS's records) on the adapter's clock, with
// the one offset of the backend's epoch.
func (b *Backend) wall(t time.Time) int64 { return t.UnixNano() - b.epoch.UnixNano() }

// sendSpans reads DBOS's records of the run's steps and sends its spans
// (none when they cannot be read: the log says so).
func (b *Backend) sendSpans(run string, rs *runState, end int64) {
	steps, err := dbos.GetWorkflowSteps(b.dctx, run, dbos.WithStepsLoadOutput(false))
	if err != nil {
		b.cfg.Logger.Warn("read the run's steps for its spans; the run has none", "run", run, "err", err)
		return
	}
	rs.mu.Lock()
	spans := buildSpans(steps, rs.trace, b.wall, end)
	rs.mu.Unlock()
	if es, ok := b.sink.(eventsSink); ok {
		es.Events(run, spans)
		return
	}
	for _, sp := range spans {
		b.sink.Event(run, sp)
	}
}

// eventsSink is a sink that records several events at once
// (protocol.Server's Events).
type eventsSink interface {
	Events(run string, evs []protocol.Event)
}
