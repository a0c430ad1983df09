// Package world defines the contract between the durable engine and the
// backend it runs on: runs, a per-run append-only event log with an optional
// precondition guard, a queue with visibility timeouts and attempt numbers,
// hooks and streams, typed errors, declared capabilities, and the Runtime the
// engine uses to read the clock, sleep and spawn tasks.
//
// Every world (mem, nats, sim, and the profile decorator) implements World and
// passes the conformance suite in world/worldtest.
package world

import (
	"context"
	"time"
)

// World is a backend a durable engine runs on.
type World interface {
	// Name is the world's registry name ("mem", "nats", "sim").
	Name() string
	// Capabilities declares what the world enforces and how it retries.
	Capabilities() Capabilities
	// Runtime is the clock and scheduler the engine must use on this world.
	Runtime() Runtime

	Runs
	Log
	Queue
	Hooks
	Streams

	// Close releases the world's resources. In-flight consumers are stopped.
	Close() error
}

// RetryStyle is how a world retries a delivery whose handler failed.
type RetryStyle string

const (
	// Redeliver naks the message: the same message comes back with attempt+1.
	Redeliver RetryStyle = "redeliver"
	// Fresh re-enqueues a fresh copy whose attempt starts at 1, while the
	// original is redelivered (attempt+1) only after the visibility timeout.
	// This is the behaviour behind the 300 s stalls in the reference write-ups.
	Fresh RetryStyle = "fresh"
)

// Capabilities are declared by a world and read by the engine and the driver.
type Capabilities struct {
	// Guard is true when the world enforces Precondition on Append.
	Guard bool
	// RetryStyle is how failed deliveries are retried.
	RetryStyle RetryStyle
	// VisibilityTimeout is how long a delivered, unacknowledged message stays
	// invisible before it is redelivered with attempt+1.
	VisibilityTimeout time.Duration
	// VirtualTime is true when the Runtime's clock is simulated.
	VirtualTime bool
	// Concurrency, when set, is how many deliveries the platform runs at
	// once per consumer (a deployment's function concurrency, from a
	// profile): an engine not told otherwise asks Consume for that many.
	Concurrency int
	// CapacityWaits is true when some calls may wait for backend capacity
	// and the world reports each call's wait through a CallWait in its
	// context (and a delivery's through DeliveryWait): see waits.go.
	CapacityWaits bool
}

// Options are the settings every world accepts. Zero values mean defaults.
type Options struct {
	// Guard makes the world enforce Precondition on Append.
	Guard bool
	// RetryStyle defaults to Redeliver.
	RetryStyle RetryStyle
	// VisibilityTimeout defaults to DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// RetryDelay is the first delay before a failed delivery is retried
	// (nak delay for Redeliver, delay of the fresh copy for Fresh); it doubles
	// on each further failure of the same message lineage, capped at the
	// visibility timeout. Defaults to DefaultRetryDelay.
	RetryDelay time.Duration
	// Seed seeds any randomness in the world.
	Seed int64
}

// Defaults used when Options leave a field zero.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultRetryDelay        = 10 * time.Millisecond
)

// WithDefaults returns o with zero fields replaced by their defaults.
func (o Options) WithDefaults() Options {
	if o.RetryStyle == "" {
		o.RetryStyle = Redeliver
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	return o
}

// RunStatus is the lifecycle state of a run, derived from its event log.
type RunStatus string

const (
	StatusPending   RunStatus = "pending"   // run_created only
	StatusRunning   RunStatus = "running"   // run_started seen
	StatusCompleted RunStatus = "completed" // run_completed seen
	StatusFailed    RunStatus = "failed"    // run_failed seen
)

// Terminal reports whether no further events may be appended to the run.
func (s RunStatus) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// Run is a workflow run as the world stores it.
type Run struct {
	ID         string
	Deployment string
	// SpecVersion is the engine protocol version the run was created with.
	SpecVersion int
	// Input is the run's serialized input (the engine stores its program here).
	Input  []byte
	Status RunStatus
}

// Runs creates and reads runs.
type Runs interface {
	// CreateRun stores the run and appends its run_created event (position 1).
	// A second CreateRun with the same ID fails with ErrConflict.
	CreateRun(ctx context.Context, r Run) error
	// GetRun returns the run with its current status, or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns the IDs of all runs, in creation order.
	ListRuns(ctx context.Context) ([]string, error)
}

// EventKind is the type of an event in a run's log.
type EventKind uint8

// Event kinds. Step and hook entities are views derived from these.
const (
	RunCreated EventKind = iota + 1
	RunStarted
	RunCompleted
	RunFailed
	StepCreated
	StepStarted
	StepCompleted
	StepFailed
	StepRetrying
	HookCreated
	HookReceived
	StreamClosed
)

var eventKindNames = [...]string{
	RunCreated:    "run_created",
	RunStarted:    "run_started",
	RunCompleted:  "run_completed",
	RunFailed:     "run_failed",
	StepCreated:   "step_created",
	StepStarted:   "step_started",
	StepCompleted: "step_completed",
	StepFailed:    "step_failed",
	StepRetrying:  "step_retrying",
	HookCreated:   "hook_created",
	HookReceived:  "hook_received",
	StreamClosed:  "stream_closed",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "unknown"
}

// RunTerminal reports whether the kind ends the run.
func (k EventKind) RunTerminal() bool { return k == RunCompleted || k == RunFailed }

// StepTerminal reports whether the kind ends a step.
func (k EventKind) StepTerminal() bool { return k == StepCompleted || k == StepFailed }

// Event is one entry of a run's log.
type Event struct {
	// Pos is the event's position in the run's log, 1-based, assigned by the
	// world. Ignored on Append.
	Pos  int64
	Kind EventKind
	// ID is an optional idempotency key, unique within the run: a second
	// Append with the same ID adds nothing and reports the first one's
	// position with Duplicate set.
	ID string
	// Entity is the step's correlation id (step_*), the hook token (hook_*)
	// or the stream name (stream_closed); empty for run events.
	Entity string
	// Data is an opaque payload.
	Data []byte
}

// Precondition is the writer's view of the log, checked by worlds that
// enforce the guard (the HTTP 412 analogue).
type Precondition struct {
	// Guarded asks the world to check LastPos. Unguarded appends never fail
	// with ErrPrecondition.
	Guarded bool
	// LastPos is the position of the last event the writer saw. A guarded
	// append is rejected with ErrPrecondition when the log's last position is
	// not LastPos. Worlds that do not enforce the guard ignore it.
	LastPos int64
}

// AppendResult is what a successful Append reports.
type AppendResult struct {
	// Pos is the position of the appended event (or of the earlier event with
	// the same ID when Duplicate is set).
	Pos int64
	// Duplicate is set when an event with the same ID already existed.
	Duplicate bool
	// Pending is the number of steps of the run that have a step_created and
	// no terminal step event, counted atomically with this append.
	Pending int
}

// Log is the per-run append-only event log. Worlds enforce the entity rules
// below on Append, in this order, and report violations with typed errors:
//
//  1. unknown run: ErrNotFound.
//  2. an event with the same non-empty ID exists: success, Duplicate set,
//     nothing appended (checked before the terminal-run rule, so a retried
//     append of a run's terminal event is not an error).
//  3. the run has a terminal event: ErrGone.
//  4. guarded and the log moved past LastPos (guard enforced): ErrPrecondition.
//  5. step_started, step_completed, step_failed, step_retrying for a step
//     with no step_created: ErrNotFound; for a step that already has a
//     terminal event: ErrConflict. step_created for an existing step:
//     ErrConflict (use an ID to make re-ensures idempotent).
//  6. hook_received for an unknown hook token: ErrNotFound. hook_created for
//     an existing token (in any run): ErrConflict.
type Log interface {
	Append(ctx context.Context, run string, ev Event, pre Precondition) (AppendResult, error)
	// Load returns the run's whole log in position order (ErrNotFound for an
	// unknown run). Its cost grows with the log's length, as in real engines.
	// The result is a read-only snapshot: callers must not modify it, and
	// later appends never change it (a world may share it between callers).
	Load(ctx context.Context, run string) ([]Event, error)
}

// Message is a queue message.
type Message struct {
	// ID is the idempotency key: a second Publish with an ID that was already
	// published is dropped (Publish reports it as a duplicate).
	ID string
	// Run is the run the message is for (routing and diagnostics only).
	Run string
	// Body is opaque to the world.
	Body []byte
}

// PublishOptions modify one Publish.
type PublishOptions struct {
	// Delay postpones the first delivery.
	Delay time.Duration
}

// Delivery is one delivery of a message to a consumer.
type Delivery struct {
	Message
	// Attempt is 1 for the first delivery of a message and grows by one on
	// every redelivery of the same message. A Fresh retry starts again at 1.
	Attempt int
}

// Handler processes one delivery. Returning nil acknowledges the message.
// Returning ErrAbandon neither acknowledges nor rejects it (as a crashed
// consumer would): it is redelivered after the visibility timeout. Any other
// error retries the message according to the world's RetryStyle.
type Handler func(ctx context.Context, d Delivery) error

// ConsumeOptions configure a consumer.
type ConsumeOptions struct {
	// Concurrency is the maximum number of handlers running at once (>= 1).
	Concurrency int
}

// Subscription is a running consumer.
type Subscription interface {
	// Stop stops fetching new messages and waits for running handlers.
	Stop(ctx context.Context) error
}

// Queue delivers messages at least once.
type Queue interface {
	// Publish enqueues m. duplicate reports that m.ID was published before
	// and m was dropped.
	Publish(ctx context.Context, m Message, opt PublishOptions) (duplicate bool, err error)
	// Consume starts delivering messages to h, on tasks spawned through the
	// world's Runtime, and returns at once. All messages published to the
	// world go to its consumers; with several consumers each message goes to
	// one of them.
	Consume(ctx context.Context, opt ConsumeOptions, h Handler) (Subscription, error)
}

// Hooks map hook tokens to runs. A hook is created by appending hook_created
// (Entity = token) to a run's log and resumed by appending hook_received
// (Entity = token, ID = the resume id) to the run HookRun names.
type Hooks interface {
	// HookRun returns the run that created the hook token, or ErrNotFound.
	HookRun(ctx context.Context, token string) (string, error)
}

// Chunk is one element of a stream.
type Chunk struct {
	Index int
	Data  []byte
	// WrittenAt is the writer's runtime clock when it wrote the chunk.
	WrittenAt time.Duration
}

// Streams are append-only sequences of chunks with a reader cursor.
type Streams interface {
	// WriteChunk appends a chunk; c.Index must be the stream's next index
	// (0-based), otherwise ErrConflict. Writing to a closed stream: ErrGone.
	WriteChunk(ctx context.Context, stream string, c Chunk) error
	// ReadChunks returns the chunks from index from on, waiting up to wait
	// for at least one when none is there yet. closed reports that the
	// stream was closed and every chunk up to the close was returned.
	ReadChunks(ctx context.Context, stream string, from int, wait time.Duration) (chunks []Chunk, closed bool, err error)
	// CloseStream closes the stream. Closing twice is not an error.
	CloseStream(ctx context.Context, stream string) error
}
