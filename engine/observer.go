package engine

import "time"

// StepSpan is one execution of a step, timed on the engine side with the
// world's Runtime clock.
type StepSpan struct {
	// Stage is the stage index in the program; Index the step's index in its
	// stage; Seq the step's ordinal in the whole run (0-based, stage order).
	Stage, Index, Seq int
	// Start is when the body starts (its step_started is written); End when
	// the step_completed write returns — the body and then its completion.
	Start, End time.Duration
	// Inline is true when the body ran in the orchestrator's task right after
	// dispatch, in the same invocation as the run's previous step body, so
	// no queue hop lies between them (the "turbo" path). It is false for a
	// step delivered through the queue and for the first step an invocation
	// runs after it was itself reached through the queue.
	Inline bool
	// Attempt is the delivery attempt that ran the body (1 when inline).
	Attempt int
}

// ChunkSpan is one stream chunk as the reader saw it.
type ChunkSpan struct {
	Stage, Index  int
	Written, Read time.Duration
	// Bytes is the chunk's size as read (0: not reported, e.g. by a target
	// that does not send it).
	Bytes int
}

// Observer receives engine-side timestamps. Implementations must be safe for
// concurrent use and cheap: they are called on the engine's hot path.
type Observer interface {
	// StepBody reports one execution of a step body.
	StepBody(run string, s StepSpan)
	// HookCreated reports that a run's hook is registered and may be resumed.
	HookCreated(run, token string, at time.Duration)
	// StreamChunk reports one chunk read by a stream reader step.
	StreamChunk(run string, c ChunkSpan)
	// RunFinished reports that the engine wrote the run's terminal event
	// (once per run; when the write's answer was lost, once a redelivery
	// finds the run finished).
	RunFinished(run string, at time.Duration, failed bool)
}
