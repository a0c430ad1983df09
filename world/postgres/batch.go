package pgworld

import (
	"context"
	"sync"
)

// coalescer sends, per key (a run's appends; all publishes), up to
// inFlight calls at once as they come, and the calls that arrive while
// that many are in flight as one batch when one returns. A lone call goes
// at once, on its caller's task; a burst costs one statement and one
// commit per batch instead of one per call. It orders nothing the database
// relies on: every rule is still checked there, whatever else writes.
type coalescer[T any] struct {
	// send sends one batch and completes its calls.
	send     func(key string, batch []T)
	max      int // most calls in one batch
	inFlight int // most batches of a key in flight

	mu sync.Mutex
	// queues has an entry for each key with a batch in flight: how many
	// are, and the calls waiting for one to return.
	queues map[string]*keyQueue[T]
}

type keyQueue[T any] struct {
	inFlight int
	waiting  []T
}

func newCoalescer[T any](max, inFlight int, send func(key string, batch []T)) *coalescer[T] {
	return &coalescer[T]{send: send, max: max, inFlight: inFlight, queues: make(map[string]*keyQueue[T])}
}

// do sends item now when fewer than inFlight batches of key are in flight,
// and returns after that batch; otherwise it queues item for a later batch
// and returns at once (send completes it later).
func (c *coalescer[T]) do(key string, item T) {
	c.mu.Lock()
	q := c.queues[key]
	if q == nil {
		q = &keyQueue[T]{}
		c.queues[key] = q
	}
	if q.inFlight >= c.inFlight {
		q.waiting = append(q.waiting, item)
		c.mu.Unlock()
		return
	}
	q.inFlight++
	c.mu.Unlock()
	c.flush(key, q, []T{item})
}

// flush sends batch, then what queued meanwhile on a task of its own, so
// the caller that sent batch returns.
func (c *coalescer[T]) flush(key string, q *keyQueue[T], batch []T) {
	c.send(key, batch)
	c.mu.Lock()
	if len(q.waiting) == 0 {
		if q.inFlight--; q.inFlight == 0 {
			delete(c.queues, key)
		}
		c.mu.Unlock()
		return
	}
	n := min(len(q.waiting), c.max)
	next := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	c.mu.Unlock()
	go c.flush(key, q, next)
}

// call is what every batched request carries: its caller's context, its
// outcome, and done, closed once the batch that took it returns.
type call struct {
	ctx  context.Context
	err  error
	done chan struct{}
}

func newCall(ctx context.Context) call { return call{ctx: ctx, done: make(chan struct{})} }

func (c *call) base() *call { return c }

// batched is a request with a call (appendReq, publishReq).
type batched interface{ base() *call }

// waiting returns the calls of batch whose callers still wait; the others
// get their context's error and are left out of the statement.
func waiting[R batched](batch []R) []R {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.base().ctx.Err(); err != nil {
			r.base().err = err // its caller has gone: do not write for it
			continue
		}
		live = append(live, r)
	}
	return live
}

// complete closes every call of batch.
func complete[R batched](batch []R) {
	for _, r := range batch {
		close(r.base().done)
	}
}
