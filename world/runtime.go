package world

import (
	"context"
	"time"
)

// Runtime is the engine's only way to read the clock, sleep, spawn tasks and
// wait for them. The engine never calls time, go, channels or sync to wait on
// other tasks directly: on mem and nats the Runtime is the real monotonic
// clock and goroutines (Real); on sim it is a deterministic virtual-time
// scheduler, so the same engine code runs in simulated time.
//
// Short critical sections guarded by a sync.Mutex that never wait on another
// task are allowed; everything that waits goes through the Runtime.
type Runtime interface {
	// Now is the monotonic time since the runtime's epoch.
	Now() time.Duration
	// Sleep parks the calling task for d. It returns ctx.Err() early when ctx
	// is cancelled (real time) — virtual-time runtimes may only check ctx
	// before parking.
	Sleep(ctx context.Context, d time.Duration) error
	// Go spawns fn as a new task.
	Go(fn func())
	// NewGroup returns a group of tasks to wait for (errgroup semantics).
	NewGroup() Group
	// NewFuture returns an unresolved one-shot signal.
	NewFuture() Future
	// NewSemaphore returns a counting semaphore with n permits.
	NewSemaphore(n int) Semaphore
}

// Group runs tasks and waits for all of them.
type Group interface {
	// Go runs fn as a task of the group.
	Go(fn func() error)
	// Wait parks until every task of the group returned, and returns the
	// first non-nil error.
	Wait() error
}

// Future is a one-shot signal.
type Future interface {
	// Resolve signals the future; later calls do nothing.
	Resolve()
	// Wait parks until the future is resolved (true) or timeout elapsed or
	// ctx is done (false). A timeout <= 0 waits without a time limit.
	Wait(ctx context.Context, timeout time.Duration) bool
	// Done reports whether the future is resolved, without waiting.
	Done() bool
}

// Semaphore limits concurrency.
type Semaphore interface {
	// Acquire parks until a permit is free or ctx is done.
	Acquire(ctx context.Context) error
	Release()
}
