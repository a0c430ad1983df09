// Package target is the durabench target protocol (v1): how durabench
// drives an engine under test that it does not host — start a run, long-poll
// its engine-side timeline, resume its hooks, sample its clock — over HTTP
// and JSON. docs/target-protocol.md is the specification; this package holds
// its wire types, a client (Client, and Session, which plugs a target into a
// sweep's driver), a server that serves any Backend (Serve; the reference
// engine is one: NewReference), and the conformance checker (Check).
//
// Timestamps are integers of nanoseconds on the target's own clock, the one
// GET /v1/clock reads; the client converts them to the driver's clock with
// an offset estimated from min-RTT clock samples, wrong by at most RTT/2.
package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ProtocolVersion is the protocol's major version this package speaks;
// ProtocolMinor its minor version (1.3). A target that declares no minor
// version speaks 1.0: durabench talks to it as before (it ignores the
// 404 of a 1.0 target to DELETE /v1/runs/{run}); the checker marks the
// 1.1 checks "n/a" for it. A 1.2 target may send span events (EventSpan,
// MinorSpans); one below 1.2 sends none. A 1.3 target holds a start whose
// at is ahead until then (StartRequest.At, MinorStartAt); durabench sends
// at to no target below 1.3.
const (
	ProtocolVersion = 1
	ProtocolMinor   = 3
)

// The minor versions that added something: MinorRelease (1.1) DELETE
// /v1/runs/{run} and retention until it; MinorSpans (1.2) span events;
// MinorStartAt (1.3) starts held until their at.
const (
	MinorRelease = 1
	MinorSpans   = 2
	MinorStartAt = 3
)

// MaxStartAhead bounds how far ahead of the target's clock a start's at
// may be (1.3): a start further ahead is refused (400), so that no start
// holds a target's starter for long.
const MaxStartAhead = time.Second

// Info is GET /v1/info: what the target is and what it can run.
type Info struct {
	Protocol int `json:"protocol"`
	// Minor is the protocol's minor version (2 for 1.2, 1 for 1.1;
	// absent: 1.0).
	Minor   int    `json:"minor,omitempty"`
	Engine  string `json:"engine"`
	Version string `json:"version"`
	// Clock describes the clock of every timestamp (free text, e.g.
	// "monotonic ns since the server started").
	Clock string `json:"clock"`
	// World is what the engine runs on (its database or broker, e.g.
	// "postgres 16"), shown in reports (1.1, optional).
	World     string     `json:"world,omitempty"`
	Scenarios []Scenario `json:"scenarios"`
	// Label, when set, is how reports name the target's cells instead of
	// the name durabench started it by (e.g. "workflow 5.0.0-beta.55 ·
	// rsd=1 · local": the resolved version, switches and world).
	Label string `json:"label,omitempty"`
	// Unavailable, when set, says why the target cannot run at all as
	// configured (a combination of its settings that does not work): every
	// cell is skipped with it, never an error.
	Unavailable string `json:"unavailable,omitempty"`
	// Batch is the version of the batch endpoints the target serves (1.1,
	// optional): 0 for none, 1 for batch timeline polls (POST
	// /v1/timelines), 2 for those and batch starts (POST /v1/starts), 3
	// for those and session streams (POST /v1/sessions/{session}/stream).
	Batch int `json:"batch,omitempty"`
}

// The batch versions (Info.Batch): BatchPolls serves POST /v1/timelines;
// BatchStarts that and POST /v1/starts; BatchStreams those and POST
// /v1/sessions/{session}/stream. BatchVersion is the one this package's
// server serves.
const (
	BatchPolls   = 1
	BatchStarts  = 2
	BatchStreams = 3
	BatchVersion = BatchStreams
)

// Scenario is a scenario the target supports, with its option limits.
type Scenario struct {
	Name string `json:"name"`
	// Max bounds integer options (e.g. {"branches": 10000}); a cell over a
	// limit is skipped with the limit as its reason.
	Max map[string]int `json:"max,omitempty"`
}

// ProtocolString is the target's protocol version, "1.0", "1.1" or "1.2".
func (i Info) ProtocolString() string { return fmt.Sprintf("%d.%d", i.Protocol, i.Minor) }

// Supports reports whether info lists scenario name, and why not.
func (i Info) Supports(name string, opts map[string]string) (bool, string) {
	if i.Unavailable != "" {
		return false, i.Unavailable
	}
	for _, s := range i.Scenarios {
		if s.Name != name {
			continue
		}
		for opt, limit := range s.Max {
			var v int
			if _, err := fmt.Sscan(opts[opt], &v); err == nil && v > limit {
				return false, fmt.Sprintf("%s %s=%d is over its limit %d", i.Engine, opt, v, limit)
			}
		}
		return true, ""
	}
	return false, fmt.Sprintf("%s does not support scenario %s", i.Engine, name)
}

// StartRequest is POST /v1/runs.
type StartRequest struct {
	// Run is durabench's run id; the target uses it in every answer.
	Run      string            `json:"run"`
	Scenario string            `json:"scenario"`
	Options  map[string]string `json:"options,omitempty"`
	// Session names the driver session the run belongs to (batch 1,
	// optional): a batch timeline poll of that session answers for it.
	Session string `json:"session,omitempty"`
	// Spans asks for the run's span events (1.2, optional): durabench
	// sets it when it walks the run's critical path. A target may send
	// spans whether asked or not; one whose spans cost it something may
	// send them only when asked.
	Spans bool `json:"spans,omitempty"`
	// At, when set (1.3, optional), is when the run is to start, on the
	// target's clock (ns): a target holds the start until then (at most
	// MaxStartAhead ahead; one already past starts at once). durabench
	// sends it a little ahead of the run's schedule, so that the start's
	// way to the target is not in the run's times, and sends it to no
	// target below 1.3.
	At int64 `json:"at,omitempty"`
}

// StartReply answers StartRequest once the engine accepted the run.
type StartReply struct {
	Run string `json:"run"`
	// Accepted is the target's clock when the engine accepted the run.
	Accepted int64 `json:"accepted"`
}

// Run statuses in a Timeline.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// Event kinds in a Timeline.
const (
	EventRunStarted    = "run_started"
	EventStepStarted   = "step_started"
	EventStepCompleted = "step_completed"
	EventStepFailed    = "step_failed"
	EventHookWaiting   = "hook_waiting"
	EventHookReceived  = "hook_received"
	EventChunkWritten  = "chunk_written"
	EventChunkRead     = "chunk_read"
	EventRunCompleted  = "run_completed"
	EventRunFailed     = "run_failed"
	// EventSpan (1.2) is an interval of the run's engine-side work with a
	// critical-path category: At its start, End its end.
	EventSpan = "span"
)

// Span categories (1.2): the critical-path categories a target's span
// may carry (docs/critical-path.md; every one but driver_lag, the
// driver's own).
const (
	CatStart        = "start"
	CatQueueWait    = "queue_wait"
	CatLogLoad      = "log_load"
	CatWrite        = "write"
	CatPublish      = "publish"
	CatRunRead      = "run_read"
	CatCompute      = "compute"
	CatBody         = "body"
	CatContention   = "contention"
	CatUnattributed = "unattributed"
)

// SpanList numbers a run's spans as they are added: the ids parent and
// after refer to.
type SpanList []Event

// Add appends ev as a span, its end at least its start and its source the
// worker's unless set, and returns its id (1, 2, 3, …).
func (l *SpanList) Add(ev Event) int64 {
	ev.Kind = EventSpan
	if ev.Source == "" {
		ev.Source = SourceWorker
	}
	ev.End = max(ev.End, ev.At)
	ev.SpanID = int64(len(*l) + 1)
	*l = append(*l, ev)
	return ev.SpanID
}

// Event sources: where an event's timestamp was taken.
const (
	SourceHistory = "history" // the engine's own history or log
	SourceWorker  = "worker"  // the process that ran the step body
	SourceSDK     = "sdk"     // an SDK hook or interceptor
)

// Event is one engine-side event of a run.
type Event struct {
	// Seq numbers a run's events from 1 in the order the target recorded
	// them; a timeline poll asks for the events after a Seq.
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	// At is the target's clock, in nanoseconds.
	At     int64  `json:"at"`
	Source string `json:"source"`
	// Stage and Index name a step (or a chunk's stream stage and chunk
	// index); Attempt is the step's delivery attempt (1 = first).
	Stage   int `json:"stage,omitempty"`
	Index   int `json:"index,omitempty"`
	Attempt int `json:"attempt,omitempty"`
	// Inline is set on a step that ran in the orchestrator's own task,
	// with no queue hop before it.
	Inline bool `json:"inline,omitempty"`
	// Token is a hook's token; Written a chunk_read's write time (target
	// clock, ns).
	Token   string `json:"token,omitempty"`
	Written int64  `json:"written,omitempty"`
	// Bytes is a chunk_read's size as read (optional: without it the
	// chunk's size is the one the scenario makes).
	Bytes int    `json:"bytes,omitempty"`
	Error string `json:"error,omitempty"`

	// A span (1.2, kind "span"; docs/target-protocol.md#spans-12): End
	// is its end (target clock, ns; At its start); Category one of the
	// critical-path categories (metrics.Categories, not driver_lag); Name
	// what it is, for display. SpanID identifies it among the run's spans
	// (0: nothing refers to it); Parent is the span holding it (a task
	// and its calls), After a span in another task it happens after (0:
	// none). Wait is the part of it, from At, spent waiting for backend
	// capacity (ns). Stage and Index name its step, if any.
	End      int64  `json:"end,omitempty"`
	Category string `json:"category,omitempty"`
	Name     string `json:"name,omitempty"`
	SpanID   int64  `json:"span,omitempty"`
	Parent   int64  `json:"parent,omitempty"`
	After    int64  `json:"after,omitempty"`
	Wait     int64  `json:"wait,omitempty"`
}

// Terminal reports whether e ends its run (run_completed or run_failed).
func (e Event) Terminal() bool { return e.Kind == EventRunCompleted || e.Kind == EventRunFailed }

// Timeline is GET /v1/runs/{id}/timeline?after=SEQ&wait=DURATION: the
// run's status and its events after SEQ. The target answers as soon as it
// has any, or when the run is terminal, or when the wait ends.
type Timeline struct {
	Run    string  `json:"run"`
	Status string  `json:"status"`
	Error  string  `json:"error,omitempty"`
	Events []Event `json:"events"`
	// Anomalies are what the target found wrong in the run's own history
	// (a duplicate terminal event, a step completed twice, a status that
	// disagrees with the terminal event): the run's full list so far, each
	// answer replacing the last. Optional.
	Anomalies []Anomaly `json:"anomalies,omitempty"`
}

// BatchRequest is POST /v1/timelines (batch 1): the timelines of a
// session's runs, in one long poll. The target first releases the runs
// in Release (as DELETE /v1/runs/{run} would), then answers as soon as
// any run of the session — started with its name and not released — or
// any run listed in Runs has events after its cursor or a terminal
// status, or when Wait ends.
type BatchRequest struct {
	Session string `json:"session"`
	// Runs are cursors: the events after After of Run. A run of the
	// session that is not listed is read from its first event.
	Runs []Cursor `json:"runs,omitempty"`
	// Wait is the long poll's wait, as a timeline poll's (FormatWait).
	Wait    string   `json:"wait,omitempty"`
	Release []string `json:"release,omitempty"`
}

// StartsRequest is POST /v1/starts (batch 2): several starts at once.
type StartsRequest struct {
	Runs []StartRequest `json:"runs"`
}

// StartsReply answers StartsRequest: each run's start, in order.
type StartsReply struct {
	Started []StartResult `json:"started"`
}

// StartResult is one run's start in a batch: Code is the status a
// POST /v1/runs would have answered (202, or 409, 422, 5xx with Error).
type StartResult struct {
	Run      string `json:"run"`
	Code     int    `json:"code"`
	Accepted int64  `json:"accepted,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StreamCommand is one line a driver writes on a session stream (batch
// 3): a run to start, its session the stream's.
type StreamCommand struct {
	Start *StartRequest `json:"start,omitempty"`
}

// StreamMessage is one line a target writes on a session stream: a start's
// answer (as a batch start's result), a run's news — its events since the
// stream's last line for it, in seq order, and its status — or why the
// target ends the stream (a line it could not read).
type StreamMessage struct {
	Started  *StartResult `json:"started,omitempty"`
	Timeline *Timeline    `json:"timeline,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// Cursor is a run's last event read.
type Cursor struct {
	Run   string `json:"run"`
	After int64  `json:"after"`
}

// BatchReply answers a BatchRequest: a timeline (as GET
// /v1/runs/{run}/timeline answers it) for each run with news, and the
// listed runs the target does not know (never started, or forgotten).
type BatchReply struct {
	Timelines []Timeline `json:"timelines"`
	Missing   []string   `json:"missing,omitempty"`
}

// Anomaly is one thing wrong in a run's engine-side history.
type Anomaly struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
}

// Terminal reports whether the timeline's run is over.
func (t Timeline) Terminal() bool { return t.Status == StatusCompleted || t.Status == StatusFailed }

// ResumeRequest is POST /v1/runs/{id}/hooks/{token}.
type ResumeRequest struct {
	// ResumeID makes the resume idempotent: a second resume with the same
	// id is a no-op.
	ResumeID string `json:"resume_id"`
	Payload  []byte `json:"payload,omitempty"`
}

// ClockReply is GET /v1/clock.
type ClockReply struct {
	Now int64 `json:"now"`
}

// ErrorReply is the body of every non-2xx answer.
type ErrorReply struct {
	Error string `json:"error"`
}

// ns converts a duration on a runtime clock to protocol nanoseconds.
func ns(d time.Duration) int64 { return int64(d) }

// ErrProtocol is wrapped by every error about what a target answered (a
// status, a body that does not decode): the target's fault, with its
// message.
var ErrProtocol = errors.New("target protocol")

// FormatWait is how durabench writes a long poll's wait: whole
// milliseconds with the unit, "5000ms" — a Go duration, and an integer
// any language parses once "ms" is cut.
func FormatWait(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// ParseWait reads a wait as a target should: a Go duration ("5s",
// "5000ms", "1.5s") or a bare integer of milliseconds ("5000").
func ParseWait(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}
