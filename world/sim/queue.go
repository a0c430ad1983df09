package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

type msgState uint8

const (
	msgReady msgState = iota
	msgInflight
	msgAcked
)

// lineage is shared by a message and the fresh copies made of it, so the
// retry delay keeps doubling across Fresh retries.
type lineage struct{ failures int }

type message struct {
	m       world.Message
	seq     uint64 // enqueue order, the tie-break after readyAt
	readyAt time.Duration
	attempt int // deliveries so far
	state   msgState
	// delivery numbers the message's deliveries; a visibility timeout or a
	// nak only acts on the delivery that is still current.
	delivery int
	lin      *lineage
}

// msgHeap orders ready messages by (readyAt, seq).
type msgHeap []*message

func (h msgHeap) less(i, j int) bool {
	if h[i].readyAt != h[j].readyAt {
		return h[i].readyAt < h[j].readyAt
	}
	return h[i].seq < h[j].seq
}

func (h *msgHeap) push(m *message) {
	*h = append(*h, m)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *msgHeap) pop() *message {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// queue delivers messages to consumer handler tasks in (readyAt, seq)
// order, at most Concurrency handlers per subscription at once.
type queue struct {
	w         *World
	seq       uint64
	ready     msgHeap
	published map[string]bool
	subs      []*subscription
	rr        int
}

type subscription struct {
	q       *queue
	id      int
	ctx     context.Context
	h       world.Handler
	conc    int
	running int
	stopped bool
	idle    waiters
}

// Publish enqueues m after the publish latency; a message whose ID was
// published before is dropped and reported as a duplicate.
func (w *World) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) (bool, error) { return w.Publish(ctx, m, opt) })
	}
	if err := w.enter(ctx); err != nil {
		return false, err
	}
	if err := w.await(world.OpPublish); err != nil {
		return false, err
	}
	q := &w.q
	if m.ID != "" {
		if q.published[m.ID] {
			w.s.record(string(world.OpPublish), m.Run, m.ID+" -> duplicate")
			return true, nil
		}
		if q.published == nil {
			q.published = map[string]bool{}
		}
		q.published[m.ID] = true
	}
	delay := max(opt.Delay, 0)
	q.seq++
	msg := &message{m: m, seq: q.seq, readyAt: w.s.now + delay, lin: &lineage{}}
	if w.s.trace != nil {
		w.s.record(string(world.OpPublish), m.Run, fmt.Sprintf("%s seq=%d delay=%v", m.ID, msg.seq, delay))
	}
	q.enqueue(msg)
	return false, nil
}

// Consume starts a subscription. Handlers run on tasks of the simulation.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	if err := w.enter(ctx); err != nil {
		return nil, err
	}
	q := &w.q
	sub := &subscription{q: q, id: len(q.subs) + 1, ctx: ctx, h: h, conc: max(opt.Concurrency, 1)}
	q.subs = append(q.subs, sub)
	w.s.record("consume", "", fmt.Sprintf("sub=%d concurrency=%d", sub.id, sub.conc))
	q.pump()
	return sub, nil
}

// Stop stops the subscription's deliveries and parks until its running
// handlers returned.
func (sub *subscription) Stop(ctx context.Context) error {
	w := sub.q.w
	if !w.s.inTask() {
		_, err := outside(w, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, sub.Stop(ctx) })
		return err
	}
	sub.stopped = true
	for sub.running > 0 {
		sub.idle.add(w.s.cur)
		w.s.park()
	}
	return nil
}

// enqueue makes msg ready at msg.readyAt.
func (q *queue) enqueue(msg *message) {
	msg.state = msgReady
	q.ready.push(msg)
	if d := msg.readyAt - q.w.s.now; d > 0 {
		q.w.s.after(d, q.pump)
	} else {
		q.pump()
	}
}

// pick returns the next subscription with a free handler slot, round robin.
func (q *queue) pick() *subscription {
	for i := range q.subs {
		k := (q.rr + i) % len(q.subs)
		sub := q.subs[k]
		if !sub.stopped && sub.running < sub.conc && sub.ctx.Err() == nil {
			q.rr = k + 1
			return sub
		}
	}
	return nil
}

// pump hands every ready message it can to a free handler slot. It runs in
// scheduler or task context and never parks.
func (q *queue) pump() {
	s := q.w.s
	for len(q.ready) > 0 {
		top := q.ready[0]
		if top.state != msgReady {
			q.ready.pop() // acked while waiting
			continue
		}
		if top.readyAt > s.now || q.w.closed {
			return
		}
		sub := q.pick()
		if sub == nil {
			return
		}
		q.deliver(sub, q.ready.pop())
	}
}

func (q *queue) deliver(sub *subscription, msg *message) {
	w := q.w
	s := w.s
	msg.state = msgInflight
	msg.attempt++
	msg.delivery++
	gen, attempt := msg.delivery, msg.attempt
	sub.running++
	if s.trace != nil {
		s.record("dispatch", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d sub=%d", msg.m.ID, msg.seq, attempt, sub.id))
	}
	s.after(w.opts.VisibilityTimeout, func() {
		if msg.state == msgInflight && msg.delivery == gen {
			if s.trace != nil {
				s.record("visibility", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d expired", msg.m.ID, msg.seq, attempt))
			}
			msg.readyAt = s.now
			q.enqueue(msg)
		}
	})
	s.spawn("handler", false, func() {
		s.sleep(w.latency(world.OpDeliver))
		err := world.ErrClosed
		if !w.closed {
			if s.trace != nil {
				s.record(string(world.OpDeliver), msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d", msg.m.ID, msg.seq, attempt))
			}
			err = sub.h(sub.ctx, world.Delivery{Message: msg.m, Attempt: attempt})
		}
		sub.running--
		q.settle(msg, gen, attempt, err)
		if sub.running == 0 {
			sub.idle.wakeAll(s)
		}
		q.pump()
	})
}

// settle applies a handler's outcome: nil acks, ErrAbandon leaves the
// message to its visibility timeout, any other error retries it by the
// world's retry style.
func (q *queue) settle(msg *message, gen, attempt int, err error) {
	w := q.w
	s := w.s
	switch {
	case err == nil:
		msg.state = msgAcked
		if s.trace != nil {
			s.record("ack", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d", msg.m.ID, msg.seq, attempt))
		}
		return
	case errors.Is(err, world.ErrAbandon), errors.Is(err, world.ErrClosed) && w.closed:
		if s.trace != nil {
			s.record("abandon", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d", msg.m.ID, msg.seq, attempt))
		}
		return
	}
	if msg.state != msgInflight || msg.delivery != gen {
		if s.trace != nil {
			s.record("nak-stale", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d: %v", msg.m.ID, msg.seq, attempt, err))
		}
		return
	}
	msg.lin.failures++
	delay := w.opts.VisibilityTimeout
	if f := msg.lin.failures - 1; f < 32 {
		delay = min(w.opts.RetryDelay<<f, w.opts.VisibilityTimeout)
	}
	if w.opts.RetryStyle == world.Fresh {
		q.seq++
		cp := &message{m: msg.m, seq: q.seq, readyAt: s.now + delay, lin: msg.lin}
		if s.trace != nil {
			s.record("fresh", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d -> copy seq=%d in %v: %v", msg.m.ID, msg.seq, attempt, cp.seq, delay, err))
		}
		q.enqueue(cp) // the original stays in flight until its visibility timeout
		return
	}
	if s.trace != nil {
		s.record("nak", msg.m.Run, fmt.Sprintf("%s seq=%d attempt=%d retry in %v: %v", msg.m.ID, msg.seq, attempt, delay, err))
	}
	msg.readyAt = s.now + delay
	q.enqueue(msg)
}
