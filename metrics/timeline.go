package metrics

import (
	"time"

	"github.com/durabench/durabench/engine"
)

// RunTimeline is everything recorded about one run, on the world's Runtime
// clock (time since the runtime's epoch).
type RunTimeline struct {
	ID string
	// T0 is the run's anchor: its scheduled start. Latency is measured from
	// the schedule, not from when the driver got round to starting the run,
	// so a backlogged system cannot hide its own queueing.
	T0 time.Duration
	// Done is when the engine wrote the run's terminal event (Finished).
	Done time.Duration
	// Finished is set once the run reached a terminal event; Failed when
	// that event was run_failed (or the driver could not start the run).
	Finished, Failed bool
	// Cut is, for a run that had not finished, the time its snapshot was
	// taken (the cell timeout): its TTLS and TTC are Cut − T0.
	Cut time.Duration
	// Steps are the step-body executions in the order they were reported;
	// a redelivered step appears once per execution.
	Steps []engine.StepSpan
	// Chunks are stream chunks as the reader saw them.
	Chunks []engine.ChunkSpan
	// Hooks are the run's hooks with their creation and resume times.
	Hooks []HookSpan
	// Error describes why the run failed, when known.
	Error string
	// Spans are where the run's time went (critpath.go), in the order
	// they were reported: its driver lag and the spans reported in the
	// critical path's own terms (a target's). The built-in engine's spans
	// are kept apart, packed (engineSpans, spanstore.go); AllSpans returns
	// them all. They are not written with the timeline (a 256-branch run
	// has thousands); its critical path is (Path), and the timelines store
	// writes every span beside it (reporters/traces), read back here.
	Spans []Span `json:"-"`
	// engineSpans are the built-in engine's spans, as the Recorder keeps
	// them.
	engineSpans engineSpans
	// Path is the run's critical path, when a writer of timelines set it
	// (RunPath): the segments that make up its TTLS.
	Path []PathSegment `json:",omitempty"`
}

// HookSpan is one hook of a run.
type HookSpan struct {
	Token string
	// Created is when the engine registered the hook; Resumed when the
	// driver resumed it (0 with Resumed unset until then).
	Created, Resumed time.Duration
	WasResumed       bool
}

// Elapsed is the run's duration as far as it is known: Done − T0 for a
// finished run, Cut − T0 for one that was given up.
func (t *RunTimeline) Elapsed() time.Duration {
	if t.Finished {
		return t.Done - t.T0
	}
	return t.Cut - t.T0
}

// clone returns a deep copy, so a snapshot never aliases slices the
// Recorder keeps appending to.
func (t *RunTimeline) clone() RunTimeline {
	c := *t
	c.Steps = append([]engine.StepSpan(nil), t.Steps...)
	c.Chunks = append([]engine.ChunkSpan(nil), t.Chunks...)
	c.Hooks = append([]HookSpan(nil), t.Hooks...)
	// Spans are only ever appended to: the copy shares the ones reported
	// so far (its capacity capped, so an append to either side never
	// writes where the other reads).
	c.Spans = t.Spans[:len(t.Spans):len(t.Spans)]
	c.engineSpans = t.engineSpans.snapshot()
	return c
}
