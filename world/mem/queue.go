package mem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/durabench/durabench/world"
)

// queue holds every message of the world. Timers are time.AfterFunc: the Go
// runtime keeps them in its own heap, so thousands of delays and visibility
// timeouts per second cost no goroutine each.
type queue struct {
	mu        sync.Mutex
	published map[string]struct{} // every published ID, for the world's life
	ready     []*msg              // FIFO of deliverable messages
	head      int                 // ready[head:] is the live part
	wake      chan struct{}       // closed and replaced when ready grows and someone waits
	wakeUsed  bool                // a dispatcher is waiting on wake
	subs      map[*subscription]struct{}
}

func (q *queue) init() {
	q.published = make(map[string]struct{})
	q.wake = make(chan struct{})
	q.subs = make(map[*subscription]struct{})
}

type msgState uint8

const (
	stateWaiting  msgState = iota // delayed: a timer will make it ready
	stateReady                    // in the ready FIFO
	stateInflight                 // delivered, not settled
	stateAcked                    // done; stale timers and FIFO entries skip it
)

// msg is one message as the queue tracks it. A Fresh retry is a new msg with
// the same Message.
type msg struct {
	m          world.Message
	state      msgState
	deliveries int         // deliveries so far; the next Attempt is deliveries+1
	failures   int         // failed deliveries along the lineage (drives the retry delay)
	gen        int         // which delivery is current; older handlers are stale
	vt         *time.Timer // visibility timeout of the current delivery
}

// Publish enqueues m unless m.ID was published before.
func (w *World) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	if err := w.checkOpen(ctx); err != nil {
		return false, err
	}
	m.Body = clone(m.Body)
	q := &w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if m.ID != "" {
		if _, dup := q.published[m.ID]; dup {
			return true, nil
		}
		q.published[m.ID] = struct{}{}
	}
	w.enqueueLocked(&msg{m: m}, opt.Delay)
	return false, nil
}

// enqueueLocked makes mm ready now or after delay. q.mu must be held.
func (w *World) enqueueLocked(mm *msg, delay time.Duration) {
	if delay <= 0 {
		w.q.pushLocked(mm)
		return
	}
	mm.state = stateWaiting
	time.AfterFunc(delay, func() {
		w.q.mu.Lock()
		defer w.q.mu.Unlock()
		if mm.state == stateWaiting && !w.closed.Load() {
			w.q.pushLocked(mm)
		}
	})
}

func (q *queue) pushLocked(mm *msg) {
	mm.state = stateReady
	q.ready = append(q.ready, mm)
	if q.wakeUsed {
		close(q.wake)
		q.wake, q.wakeUsed = make(chan struct{}), false
	}
}

// popLocked returns the next ready message, or nil.
func (q *queue) popLocked() *msg {
	for q.head < len(q.ready) {
		mm := q.ready[q.head]
		q.ready[q.head] = nil
		q.head++
		if q.head == len(q.ready) {
			q.ready, q.head = q.ready[:0], 0
		} else if q.head > 1024 && q.head*2 > len(q.ready) {
			// Compact so a long-lived backlog does not pin a growing array.
			n := copy(q.ready, q.ready[q.head:])
			q.ready, q.head = q.ready[:n], 0
		}
		if mm.state == stateReady {
			return mm
		}
	}
	return nil
}

// deliverLocked marks mm in flight and arms its visibility timeout.
func (w *World) deliverLocked(mm *msg) (world.Delivery, int) {
	mm.state = stateInflight
	mm.deliveries++
	mm.gen++
	gen := mm.gen
	mm.vt = time.AfterFunc(w.opts.VisibilityTimeout, func() {
		w.q.mu.Lock()
		defer w.q.mu.Unlock()
		if mm.state == stateInflight && mm.gen == gen && !w.closed.Load() {
			w.q.pushLocked(mm)
		}
	})
	return world.Delivery{Message: mm.m, Attempt: mm.deliveries}, gen
}

// settle applies a handler's result to delivery gen of mm.
func (w *World) settle(mm *msg, gen int, err error) {
	q := &w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.closed.Load() || mm.state == stateAcked {
		return
	}
	if err == nil {
		// Any delivery's ack settles the message, even a stale one: the work
		// was done.
		mm.state = stateAcked
		if mm.vt != nil {
			mm.vt.Stop()
		}
		return
	}
	if errors.Is(err, world.ErrAbandon) || mm.gen != gen || mm.state != stateInflight {
		// Abandoned, or a stale delivery failed after the message moved on:
		// the visibility timeout (or the newer delivery) decides.
		return
	}
	mm.failures++
	delay := w.retryDelay(mm.failures)
	switch w.opts.RetryStyle {
	case world.Fresh:
		// A fresh copy restarts at attempt 1; the original stays in flight
		// until its visibility timeout redelivers it with attempt+1.
		w.enqueueLocked(&msg{m: mm.m, failures: mm.failures}, delay)
	default:
		mm.vt.Stop()
		w.enqueueLocked(mm, delay)
	}
}

// retryDelay is RetryDelay doubled per earlier failure, capped at the
// visibility timeout.
func (w *World) retryDelay(failures int) time.Duration {
	d := w.opts.RetryDelay
	for i := 1; i < failures && d < w.opts.VisibilityTimeout; i++ {
		d *= 2
	}
	return min(d, w.opts.VisibilityTimeout)
}

// subscription is one Consume: a dispatcher task that hands ready messages to
// up to Concurrency handler tasks.
type subscription struct {
	w      *World
	h      world.Handler
	ctx    context.Context // handlers' context; cancelled by Close
	cancel context.CancelFunc
	slots  chan struct{}

	unhook   func() bool // detaches halt from the Consume context
	stopOnce sync.Once
	stop     chan struct{} // closed by Stop and Close
	stopped  bool          // guarded by w.q.mu: no pop after this is set
	dispatch chan struct{} // closed when the dispatcher returned
	handlers sync.WaitGroup
}

// Consume starts a dispatcher and up to opt.Concurrency concurrent handlers.
// Consumers of one world share its messages. Cancelling ctx stops fetching,
// as Stop does; running handlers keep their context, which only Close
// cancels, so a handler is never cut off halfway through by its consumer.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	if err := w.checkOpen(ctx); err != nil {
		return nil, err
	}
	if opt.Concurrency < 1 {
		return nil, fmt.Errorf("mem: consume: concurrency %d, want >= 1", opt.Concurrency)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		w: w, h: h, ctx: sctx, cancel: cancel,
		slots:    make(chan struct{}, opt.Concurrency),
		stop:     make(chan struct{}),
		dispatch: make(chan struct{}),
	}
	w.q.mu.Lock()
	if w.closed.Load() {
		w.q.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("mem: %w", world.ErrClosed)
	}
	w.q.subs[s] = struct{}{}
	w.q.mu.Unlock()
	// Cancelling the Consume context stops fetching, as Stop does.
	s.unhook = context.AfterFunc(ctx, s.halt)
	w.rt.Go(s.run)
	return s, nil
}

func (s *subscription) run() {
	defer close(s.dispatch)
	// Handlers run on goroutines kept for the subscription's life
	// (world.Workers; about Concurrency of them, the slots): the engine's
	// replay is deep.
	workers := world.NewWorkers()
	defer workers.Close()
	q := &s.w.q
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.stop:
			return
		}
		q.mu.Lock()
		mm := (*msg)(nil)
		for !s.stopped {
			if mm = q.popLocked(); mm != nil {
				break
			}
			wake := q.wake
			q.wakeUsed = true
			q.mu.Unlock()
			select {
			case <-wake:
			case <-s.stop:
			}
			q.mu.Lock()
		}
		if mm == nil {
			q.mu.Unlock()
			<-s.slots
			return
		}
		d, gen := s.w.deliverLocked(mm)
		s.handlers.Add(1)
		q.mu.Unlock()
		workers.Go(func() {
			defer s.handlers.Done()
			err := s.h(s.ctx, d)
			<-s.slots
			s.w.settle(mm, gen, err)
		})
	}
}

// halt stops fetching; running handlers go on.
func (s *subscription) halt() {
	s.stopOnce.Do(func() {
		s.w.q.mu.Lock()
		s.stopped = true
		s.w.q.mu.Unlock()
		close(s.stop)
	})
}

func (s *subscription) wait() {
	<-s.dispatch
	s.handlers.Wait()
}

// Stop stops fetching, then waits for running handlers or ctx.
func (s *subscription) Stop(ctx context.Context) error {
	s.halt()
	done := make(chan struct{})
	go func() {
		s.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("mem: stop consumer: %w", ctx.Err())
	}
	s.unhook()
	s.cancel()
	s.w.q.mu.Lock()
	delete(s.w.q.subs, s)
	s.w.q.mu.Unlock()
	return nil
}
