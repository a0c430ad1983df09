package pgworld

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/world"
)

// Publish enqueues m: its id into published (whose primary key drops a
// second publish of the id: duplicate), the message into queue, visible
// after opt.Delay, and a NOTIFY for the consumers, in one statement.
// Publishes that arrive while one is in flight go together in the next
// statement (unless Config.Unbatched): one commit and one NOTIFY for the
// batch — PostgreSQL serializes the commits of notifying transactions, so
// a fan-out's publishes one by one would queue on it.
func (w *World) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	if err := w.check("publish"); err != nil {
		return false, err
	}
	req := &publishReq{call: newCall(ctx), m: m, delay: max(opt.Delay, 0)}
	if w.cfg.Unbatched {
		w.publishBatch("", []*publishReq{req})
	} else {
		w.publishes.do("", req)
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		return false, w.err(ctx, "publish "+m.ID, ctx.Err())
	}
	if req.err != nil {
		return false, fmt.Errorf("pgworld: publish %s: %w", m.ID, req.err)
	}
	return req.dup, nil
}

// publishReq is one Publish waiting for its batch.
type publishReq struct {
	call
	m     world.Message
	delay time.Duration
	dup   bool
}

// publishBatch publishes the requests' messages in one statement and
// completes them.
func (w *World) publishBatch(_ string, batch []*publishReq) {
	defer complete(batch)
	live := waiting(batch)
	if len(live) == 0 {
		return
	}
	ids := make([]string, len(live))
	runs := make([]string, len(live))
	bodies := make([][]byte, len(live))
	delays := make([]int64, len(live))
	for i, r := range live {
		ids[i], runs[i], bodies[i], delays[i] = r.m.ID, r.m.Run, r.m.Body, r.delay.Microseconds()
		r.dup = true // unless the statement says it enqueued it
	}
	ctx, cancel := w.callCtx(context.Background())
	defer cancel()
	fail := func(err error) {
		err = w.err(ctx, "publish", err)
		for _, r := range live {
			r.err = err
		}
	}
	rows, err := w.pool.Query(ctx, w.q.publish, ids, runs, bodies, delays)
	if err != nil {
		fail(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var ord int64
		if err := rows.Scan(&ord); err != nil {
			fail(err)
			return
		}
		if ord < 1 || int(ord) > len(live) {
			fail(fmt.Errorf("publish: row %d of %d", ord, len(live)))
			return
		}
		live[ord-1].dup = false
	}
	if err := rows.Err(); err != nil {
		fail(err)
	}
}

// Consume starts a consumer: one task claims up to Concurrency messages at
// a time and runs a handler task for each.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	if err := w.check("consume"); err != nil {
		return nil, err
	}
	if opt.Concurrency < 1 {
		return nil, fmt.Errorf("pgworld: consume: concurrency %d, want >= 1", opt.Concurrency)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		w: w, h: h, conc: opt.Concurrency, ctx: sctx, cancel: cancel,
		poke: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("pgworld: consume: %w", world.ErrClosed)
	}
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	// Cancelling the Consume context stops fetching, as Stop does; running
	// handlers keep their context, which only Close cancels.
	s.unhook = context.AfterFunc(ctx, s.halt)
	w.rt.Go(s.run)
	return s, nil
}

// subscription is one consumer.
type subscription struct {
	w      *World
	h      world.Handler
	conc   int
	ctx    context.Context // handlers' context; cancelled by Close
	cancel context.CancelFunc

	running atomic.Int32
	// more says the queue may hold visible messages the last claim did
	// not take: it was full, or a notification came since. A handler that
	// frees its slot then pokes the claimer.
	more atomic.Bool
	poke chan struct{}

	unhook   func() bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{} // closed when run returned
	handlers sync.WaitGroup
}

// notify tells the consumer that messages were published or retried.
func (s *subscription) notify() {
	s.more.Store(true)
	wake(s.poke)
}

// run claims messages while slots are free and the queue may have some,
// then sleeps until a notification, a freed slot (when more), the moment
// the next message becomes visible, or the safety poll.
func (s *subscription) run() {
	defer close(s.done)
	timer := time.NewTimer(safetyPoll)
	defer timer.Stop()
	backoff := time.Duration(0)
	for {
		sleep := safetyPoll
		for free := s.conc - int(s.running.Load()); free > 0; free = s.conc - int(s.running.Load()) {
			if s.stopped() {
				return
			}
			s.more.Store(false)
			ds, next, err := s.w.claim(s.ctx, free)
			if err != nil {
				// Claim again soon; sooner when the server answers again
				// (setUp wakes every consumer).
				backoff = min(max(2*backoff, 50*time.Millisecond), safetyPoll)
				sleep = backoff
				break
			}
			backoff = 0
			for _, d := range ds {
				s.start(d)
			}
			if len(ds) == free {
				s.more.Store(true)
				continue
			}
			if next >= 0 {
				sleep = min(sleep, next)
			}
			if len(ds) > 0 {
				sleep = min(sleep, s.w.caps.VisibilityTimeout)
			}
			break
		}
		timer.Reset(max(sleep, time.Millisecond))
		select {
		case <-s.poke:
		case <-timer.C:
		case <-s.stop:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (s *subscription) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// delivery is a claimed message.
type delivery struct {
	world.Delivery
	seq      int64
	failures int
}

// start runs the handler of d on a task and settles the message after.
func (s *subscription) start(d delivery) {
	s.running.Add(1)
	s.handlers.Add(1)
	s.w.rt.Go(func() {
		defer s.handlers.Done()
		err := s.h(s.ctx, d.Delivery)
		s.w.settle(d, err)
		s.running.Add(-1)
		if s.more.Load() {
			wake(s.poke)
		}
	})
}

// claim takes up to n visible messages. next is how long until the next
// message becomes visible (-1: none waits).
func (w *World) claim(ctx context.Context, n int) (ds []delivery, next time.Duration, err error) {
	if err := w.check("claim"); err != nil {
		return nil, 0, err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	rows, err := w.pool.Query(ctx, w.q.claim, n)
	if err != nil {
		return nil, 0, w.err(ctx, "claim", err)
	}
	defer rows.Close()
	next = -1
	for rows.Next() {
		var d delivery
		var attempt, failures int32
		var nextUS int64
		if err := rows.Scan(&d.seq, &d.ID, &d.Run, &d.Body, &attempt, &failures, &nextUS); err != nil {
			return nil, 0, w.err(ctx, "claim", err)
		}
		if d.seq == 0 {
			if nextUS >= 0 {
				next = time.Duration(nextUS) * time.Microsecond
			}
			continue
		}
		d.Attempt, d.failures = int(attempt), int(failures)
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, w.err(ctx, "claim", err)
	}
	// Oldest first.
	slices.SortFunc(ds, func(a, b delivery) int { return int(a.seq - b.seq) })
	return ds, next, nil
}

// settle applies a handler's result to d: nil acknowledges (deletes) the
// message; ErrAbandon leaves it to the visibility timeout; any other error
// retries it by the world's retry style. A settle that fails is counted
// among the incidents; the visibility timeout then brings the message
// back.
//
// Acks go on connections reserved for them (World.ackPool), and acks that
// arrive while acksInFlight ack statements are in flight go together in
// the next one (one DELETE, one commit), whatever Config.Unbatched says: a
// burst's handlers finish together, and one statement per ack through the
// shared pool queued them behind each other and the pool's other
// statements for its connections (an acquire that finds none idle dials
// one of its own) and for their own commits — past the visibility timeout
// of messages whose handlers had returned long before, which were then
// delivered again.
func (w *World) settle(d delivery, herr error) {
	if w.isClosed() || errors.Is(herr, world.ErrAbandon) {
		return
	}
	if herr == nil {
		req := &ackReq{call: newCall(context.Background()), seq: d.seq}
		w.acks.do("", req)
		<-req.done
		return
	}
	ctx, cancel := w.callCtx(context.Background())
	defer cancel()
	var err error
	switch {
	case w.caps.RetryStyle == world.Fresh:
		_, err = w.pool.Exec(ctx, w.q.fresh, d.seq, int32(d.Attempt), w.retryDelay(d.failures+1).Microseconds())
	default:
		_, err = w.pool.Exec(ctx, w.q.nak, d.seq, int32(d.Attempt), w.retryDelay(d.failures+1).Microseconds())
	}
	_ = w.err(ctx, "settle "+d.ID, err)
}

// ackReq is one ack waiting for its batch.
type ackReq struct {
	call
	seq int64
}

// ackBatch deletes the requests' messages in one statement and completes
// them. A failure is counted once, as the statement's; the visibility
// timeout brings the messages back.
func (w *World) ackBatch(_ string, batch []*ackReq) {
	defer complete(batch)
	live := waiting(batch)
	if len(live) == 0 {
		return
	}
	seqs := make([]int64, len(live))
	for i, r := range live {
		seqs[i] = r.seq
	}
	ctx, cancel := w.callCtx(context.Background())
	defer cancel()
	_, err := w.ackPool.Exec(ctx, w.q.ack, seqs)
	if err = w.err(ctx, fmt.Sprintf("ack %d messages", len(seqs)), err); err != nil {
		for _, r := range live {
			r.err = err
		}
	}
}

// retryDelay is RetryDelay doubled per earlier failure of the lineage,
// capped at the visibility timeout.
func (w *World) retryDelay(failures int) time.Duration {
	o := w.cfg.Options
	d := o.RetryDelay
	for i := 1; i < failures && d < o.VisibilityTimeout; i++ {
		d *= 2
	}
	return min(d, o.VisibilityTimeout)
}

// halt stops claiming; running handlers go on.
func (s *subscription) halt() {
	s.stopOnce.Do(func() { close(s.stop) })
}

// Stop stops claiming, then waits for running handlers or ctx.
func (s *subscription) Stop(ctx context.Context) error {
	s.halt()
	done := make(chan struct{})
	go func() {
		<-s.done
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("pgworld: stop consumer: %w", ctx.Err())
	}
	s.unhook()
	s.cancel()
	s.w.mu.Lock()
	delete(s.w.subs, s)
	s.w.mu.Unlock()
	return nil
}
