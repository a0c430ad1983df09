package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/spancheck"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

// TestSpans runs fan-outs of 8, a sequence and a hook-step on the backend
// with its in-process server: every run's spans are well-formed, every step
// has its body span, and the critical path they give covers the run: the
// unattributed share of TTLS (the walk from the start request) stays under
// 10 %.
func TestSpans(t *testing.T) {
	ctx := context.Background()
	b := NewBackend(DefaultConfig())
	srv, err := protocol.NewServer(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	c, _ := target.NewClient(hs.URL)
	if info := b.Info(); info.Minor != 2 {
		t.Fatalf("info %+v: want protocol 1.2", info)
	}
	runToEnd(t, c, "spans-warm", "fanout", map[string]string{"branches": "8"})
	// A hook-step's path holds the driver's own time between the hook
	// waiting and its resume, which no engine span covers.
	shares := spancheck.Cells(t, []spancheck.Cell{
		{Scenario: "fanout", Opts: map[string]string{"branches": "8"}, Runs: 5, Bound: 0.10},
		{Scenario: "sequential", Opts: map[string]string{"steps": "5", "body": "1ms"}, Runs: 2, Bound: 0.10},
		{Scenario: "hook-step", Runs: 1, Bound: 1},
		{Scenario: "step", Runs: 1, Bound: 0.10},
	}, "ActivityTask", b.now, func(id, scenario string, opts map[string]string) []protocol.Event {
		return runToEnd(t, c, id, scenario, opts)
	})
	for _, r := range shares {
		if r.Scenario == "hook-step" {
			continue
		}
		for _, cat := range []string{metrics.CatStart, metrics.CatQueueWait, metrics.CatCompute, metrics.CatWrite} {
			if r.Shares[cat] == 0 {
				t.Errorf("%s: nothing on the path is %s", r.Run, cat)
			}
		}
	}
}

// TestNoSpans: with --no-spans the adapter declares 1.1 and sends no span,
// even when asked; without it, a run whose start does not ask has none.
func TestNoSpans(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.NoSpans = true
	b := NewBackend(cfg)
	srv, err := protocol.NewServer(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	c, _ := target.NewClient(hs.URL)
	if info := b.Info(); info.Minor != 1 {
		t.Fatalf("info %+v: want protocol 1.1", info)
	}
	for _, ev := range runToEnd(t, c, "nospans", "fanout", map[string]string{"branches": "4"}) {
		if ev.Kind == protocol.EventSpan {
			t.Fatalf("span event %+v with --no-spans", ev)
		}
	}
}

func TestSpansOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	b := NewBackend(DefaultConfig())
	srv, err := protocol.NewServer(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	c, _ := target.NewClient(hs.URL)
	for _, ev := range runToEndSpans(t, c, "unasked", "fanout", map[string]string{"branches": "4"}, false) {
		if ev.Kind == protocol.EventSpan {
			t.Fatalf("span event %+v in a run whose start did not ask", ev)
		}
	}
}

// history builds a synthetic history: each entry is an event type, its
// time in ms and its attributes.
type hev struct {
	typ   enumspb.EventType
	ms    float64
	attrs func(e *historypb.HistoryEvent)
}

func history(evs ...hev) []*historypb.HistoryEvent {
	base := time.Unix(1000, 0)
	var out []*historypb.HistoryEvent
	for i, e := range evs {
		h := &historypb.HistoryEvent{EventId: int64(i + 1), EventType: e.typ,
			EventTime: timestamppb.New(base.Add(time.Duration(e.ms * float64(time.Millisecond))))}
		if e.attrs != nil {
			e.attrs(h)
		}
		out = append(out, h)
	}
	return out
}

func wtStarted(sched int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: sched}}
	}
}

func wtCompleted(sched, started int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: sched, StartedEventId: started}}
	}
}

func atScheduled(id string, wtc int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityId: id, WorkflowTaskCompletedEventId: wtc}}
	}
}

func atStarted(sched int64, attempt int32) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: sched, Attempt: attempt}}
	}
}

func atCompleted(sched, started int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: sched, StartedEventId: started}}
	}
}

// TestBuildSpans checks the links on a synthetic history of a two-branch
// fan-out whose second completion arrives while a workflow task runs
// (buffered: the next workflow task follows that task, not the
// completion), with an ActivityTaskStarted written lazily at completion.
func TestBuildSpans(t *testing.T) {
	const (
		S  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
		WS = enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
		WT = enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED
		WC = enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
		AS = enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
		AT = enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED
		AC = enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		E  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	)
	hist := history(
		hev{S, 1, nil},                      // 1
		hev{WS, 1.1, nil},                   // 2
		hev{WT, 2, wtStarted(2)},            // 3
		hev{WC, 3, wtCompleted(2, 3)},       // 4
		hev{AS, 3.1, atScheduled("0/0", 4)}, // 5
		hev{AS, 3.2, atScheduled("0/1", 4)}, // 6
		hev{AT, 3.3, atStarted(5, 1)},       // 7 (lazy: written at 8)
		hev{AC, 5, atCompleted(5, 7)},       // 8
		hev{WS, 5.01, nil},                  // 9
		hev{WT, 6, wtStarted(9)},            // 10
		hev{WC, 8, wtCompleted(9, 10)},      // 11 (0/1 completed at 7, buffered)
		hev{AT, 4, atStarted(6, 2)},         // 12
		hev{AC, 7, atCompleted(6, 12)},      // 13
		hev{WS, 8.01, nil},                  // 14
		hev{WT, 9, wtStarted(14)},           // 15
		hev{WC, 10, wtCompleted(14, 15)},    // 16
		hev{E, 10.1, nil},                   // 17
	)
	base := time.Unix(1000, 0).UnixNano()
	wall := func(t time.Time) int64 { return t.UnixNano() - base }
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	tr := newRunTrace(ms(0.5))
	tr.bodies[attemptKey{0, 0, 1}] = interval{ms(4), ms(4.5)}
	tr.bodies[attemptKey{0, 1, 2}] = interval{ms(6), ms(6.5)}
	tr.act[attemptKey{0, 0, 1}] = &workerTask{recv: ms(3.8), respondStart: ms(4.6)}
	spans := buildSpans(hist, tr, wall)
	by := map[string][]protocol.Event{}
	for _, sp := range spans {
		key := sp.Name
		if sp.Category == metrics.CatBody || strings.Contains(sp.Name, "Activity") {
			key = fmt.Sprintf("%s %d/%d", sp.Name, sp.Stage, sp.Index)
		}
		by[key] = append(by[key], sp)
	}
	one := func(key string) protocol.Event {
		t.Helper()
		if len(by[key]) != 1 {
			t.Fatalf("%d spans %q; spans: %+v", len(by[key]), key, spans)
		}
		return by[key][0]
	}
	start := one("StartWorkflowExecution")
	if start.At != ms(0.5) || start.End != ms(1.1) || start.Category != "start" {
		t.Errorf("start %+v", start)
	}
	wq := by["WorkflowTaskScheduled→Started"]
	wt := by["WorkflowTask"]
	if len(wq) != 3 || len(wt) != 3 {
		t.Fatalf("workflow task spans %d, %d", len(wq), len(wt))
	}
	a0, a1 := one("ActivityTask 0/0"), one("ActivityTask 0/1")
	// First workflow task after the start; the second after activity 0/0's
	// task; the third after the second workflow task (0/1's completion was
	// buffered while it ran).
	if wq[0].After != start.SpanID || wq[1].After != a0.SpanID || wq[2].After != wt[1].SpanID {
		t.Errorf("workflow task queue waits after %d, %d, %d; want %d, %d, %d", wq[0].After, wq[1].After, wq[2].After, start.SpanID, a0.SpanID, wt[1].SpanID)
	}
	for i := range wt {
		if wt[i].After != wq[i].SpanID {
			t.Errorf("workflow task %d after %d, want its queue wait %d", i, wt[i].After, wq[i].SpanID)
		}
	}
	// The first workflow task runs to its last command (3.2 ms).
	if wt[0].End != ms(3.2) {
		t.Errorf("first workflow task ends %d, want its last ActivityTaskScheduled", wt[0].End)
	}
	q0, q1 := one("ActivityTaskScheduled→Started 0/0"), one("ActivityTaskScheduled→Started 0/1")
	if q0.At != ms(3.1) || q0.End != ms(3.3) || q0.After != wt[0].SpanID || q1.End != ms(4) || q1.After != wt[0].SpanID {
		t.Errorf("activity queue waits %+v %+v", q0, q1)
	}
	if a0.After != q0.SpanID || a0.At != ms(3.3) || a0.End != ms(5) || a1.After != q1.SpanID {
		t.Errorf("activity tasks %+v %+v", a0, a1)
	}
	b0 := one("activity durabench-step 0/0")
	if b0.Parent != a0.SpanID || b0.At != ms(4) || b0.End != ms(4.5) {
		t.Errorf("body %+v", b0)
	}
	b1 := one("activity durabench-step 0/1") // attempt 2: its body, not attempt 1's
	if b1.Parent != a1.SpanID || b1.At != ms(6) {
		t.Errorf("body %+v", b1)
	}
	deliver := one("ActivityTaskStarted→worker 0/0")
	report := by["RespondActivityTaskCompleted 0/0"]
	if deliver.Parent != a0.SpanID || deliver.At != ms(3.3) || deliver.End != ms(3.8) || deliver.Category != "write" {
		t.Errorf("delivery %+v", deliver)
	}
	if len(report) != 1 || report[0].At != ms(4.6) || report[0].End != ms(5) || report[0].Category != "write" {
		t.Errorf("completion report %+v", report)
	}
	// The walk from 0/1's body end: its task, its queue wait, the first
	// workflow task, its queue wait, the start.
	segs := metrics.CriticalPath(func() []metrics.Span {
		var out []metrics.Span
		for _, ev := range spans {
			out = append(out, metrics.Span{Category: ev.Category, Name: ev.Name, Start: time.Duration(ev.At), End: time.Duration(ev.End),
				Stage: ev.Stage, Index: ev.Index, ID: uint64(ev.SpanID), Parent: uint64(ev.Parent), After: uint64(ev.After)})
		}
		return out
	}(), 0, time.Duration(ms(6.5)), uint64(a1.SpanID))
	tot := spancheck.Totals(segs)
	want := map[string]time.Duration{
		"unattributed": time.Duration(ms(0.5)),
		"start":        time.Duration(ms(0.6)),
		"queue_wait":   time.Duration(ms(0.9 + 0.8)), // workflow task 1.1→2, activity 3.2→4
		"compute":      time.Duration(ms(1.2 + 2)),   // workflow task 2→3.2, activity 4→6 (no worker times)
		"body":         time.Duration(ms(0.5)),
	}
	for cat, d := range want {
		if diff := tot[cat] - d; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("%s %v, want %v (path %+v)", cat, tot[cat], d, segs)
		}
	}
}
