package pgworld

import "sync"

// coalescer sends the calls that arrive while one is in flight as one batch
// afterwards, per key (a run's appends; all publishes). A lone call goes at
// once, on its caller's task; a burst costs one statement and one commit
// per batch instead of one per call. It orders nothing the database relies
// on: every rule is still checked there, whatever else writes.
type coalescer[T any] struct {
	// send sends one batch and completes its calls.
	send func(key string, batch []T)
	max  int // most calls in one batch

	mu sync.Mutex
	// waiting has an entry, possibly empty, for each key with a batch in
	// flight: the calls that queued behind it.
	waiting map[string][]T
}

func newCoalescer[T any](max int, send func(key string, batch []T)) *coalescer[T] {
	return &coalescer[T]{send: send, max: max, waiting: make(map[string][]T)}
}

// do sends item now when key has no batch in flight, and returns after
// that batch; otherwise it queues item for the next batch and returns at
// once (send completes it later).
func (c *coalescer[T]) do(key string, item T) {
	c.mu.Lock()
	if q, busy := c.waiting[key]; busy {
		c.waiting[key] = append(q, item)
		c.mu.Unlock()
		return
	}
	c.waiting[key] = nil
	c.mu.Unlock()
	c.flush(key, []T{item})
}

// flush sends batch, then what queued meanwhile on a task of its own, so
// the caller that sent batch returns.
func (c *coalescer[T]) flush(key string, batch []T) {
	c.send(key, batch)
	c.mu.Lock()
	q := c.waiting[key]
	if len(q) == 0 {
		delete(c.waiting, key)
		c.mu.Unlock()
		return
	}
	n := min(len(q), c.max)
	next := q[:n:n]
	c.waiting[key] = q[n:]
	c.mu.Unlock()
	go c.flush(key, next)
}
