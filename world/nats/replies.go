package natsworld

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/world"
)

// ErrDropped is returned (wrapped in world.ErrTransient) by a call whose
// replies the client had to drop: the caller retries, and the world counts
// the drop as an incident. With the flow control below it does not happen;
// when it does, it is an error someone sees, never a silently shorter read.
var ErrDropped = fmt.Errorf("NATS client dropped replies (slow consumer): %w", world.ErrTransient)

// replyMux receives the replies of every batched read on one wildcard
// subscription (inbox prefix + call number), so a read costs no SUB/UNSUB
// of its own, and routes them to the call that asked. Flow control: at
// most readSlots calls are in flight, each asks for at most directMaxBytes,
// and the subscription's pending limits hold twice that, so the client
// never has to drop a reply. Should a drop happen anyway (the connection's
// error handler reports a slow consumer on this subscription, or the
// subscription's dropped count moved during a call), every call in flight
// while it happened fails with ErrDropped at once: a dropped message cannot
// be attributed.
type replyMux struct {
	w      *World
	prefix string
	sub    *nats.Subscription
	slots  chan struct{}

	mu    sync.Mutex
	next  uint64
	calls map[string]*readCall
}

// readCall is one read's share of the mux.
type readCall struct {
	inbox   string
	key     string
	max     int // replies expected at most (batch + end of batch)
	dropped int // the subscription's dropped count when the call started

	datas [][]byte
	end   *nats.Msg
	err   error
	done  chan struct{}
	// progress is when the last reply arrived (or the call started).
	progress time.Time
}

func newReplyMux(w *World) (*replyMux, error) {
	x := &replyMux{
		w:      w,
		prefix: w.nc.NewInbox() + ".",
		slots:  make(chan struct{}, readSlots),
		calls:  make(map[string]*readCall),
	}
	sub, err := w.nc.Subscribe(x.prefix+"*", x.deliver)
	if err != nil {
		return nil, fmt.Errorf("natsworld: reply subscription: %w", err)
	}
	if err := sub.SetPendingLimits(-1, replyPending); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("natsworld: reply subscription limits: %w", err)
	}
	x.sub = sub
	return x, nil
}

// start takes a read slot (waiting while readSlots reads are in flight)
// and registers a call expecting at most n messages and the end status.
func (x *replyMux) start(ctx context.Context, n int) (*readCall, error) {
	select {
	case x.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	dropped, _ := x.sub.Dropped()
	x.mu.Lock()
	x.next++
	key := strconv.FormatUint(x.next, 36)
	c := &readCall{inbox: x.prefix + key, key: key, max: n + 1, dropped: dropped, done: make(chan struct{}),
		progress: time.Now()}
	x.calls[key] = c
	x.mu.Unlock()
	return c, nil
}

// finish forgets the call and frees its slot.
func (x *replyMux) finish(c *readCall) {
	x.mu.Lock()
	delete(x.calls, c.key)
	x.mu.Unlock()
	<-x.slots
}

// dropCheck is how often a waiting call looks at the subscription's
// dropped count. nats.go reports only the first drop of a run of drops
// (and late, on its own goroutine), so a call whose end of batch was
// dropped later in the run hears of it from nobody: it finds out here,
// within dropCheck, instead of waiting out the idle timeout.
const dropCheck = 50 * time.Millisecond

// wait returns the call's end-of-batch (or error status) reply once every
// message before it arrived. It fails with ErrDropped when the client
// dropped replies while the call was in flight, and with a timeout when no
// reply came for idle: a server that stopped answering, not one that
// streams a long batch slowly.
func (x *replyMux) wait(ctx context.Context, c *readCall, idle time.Duration) (*nats.Msg, error) {
	t := time.NewTimer(min(idle, dropCheck))
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return c.end, c.err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
			x.mu.Lock()
			if c.end == nil && c.err == nil && x.droppedDuring(c) {
				c.fail(fmt.Errorf("natsworld: direct get: %w", ErrDropped))
			}
			quiet := time.Since(c.progress)
			x.mu.Unlock()
			select {
			case <-c.done:
				return c.end, c.err
			default:
			}
			if quiet >= idle {
				return nil, fmt.Errorf("natsworld: direct get: no reply for %s: %w", quiet.Round(time.Millisecond), nats.ErrTimeout)
			}
			t.Reset(min(idle-quiet, dropCheck))
		}
	}
}

// deliver is the subscription's handler: one goroutine, in arrival order.
func (x *replyMux) deliver(m *nats.Msg) {
	key := m.Subject[len(x.prefix):]
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.calls[key]
	if c == nil || c.end != nil || c.err != nil {
		return // a call that gave up (timeout, cancel) or already failed
	}
	if m.Header == nil || m.Header.Get("Status") == "" {
		if len(c.datas)+1 >= c.max {
			c.fail(fmt.Errorf("natsworld: direct get: more replies than the %d asked for", c.max-1))
			return
		}
		c.datas = append(c.datas, m.Data)
		c.progress = time.Now()
		return
	}
	// The status closes the call. Replies come in order on one
	// subscription, so a drop before it shows in the dropped count.
	if x.droppedDuring(c) {
		c.fail(fmt.Errorf("natsworld: direct get: %w", ErrDropped))
		return
	}
	c.end = m
	close(c.done)
}

func (c *readCall) fail(err error) {
	c.err = err
	c.datas = nil
	close(c.done)
}

// failDropped fails every call in flight that a drop could have hit: the
// client dropped replies on the subscription and cannot say whose. A call
// that started after the drops (its dropped count is the current one) lost
// nothing and goes on: nats.go reports a slow consumer asynchronously, and
// a late report must not fail the reads begun since.
func (x *replyMux) failDropped(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range x.calls {
		if c.end == nil && c.err == nil && x.droppedDuring(c) {
			c.fail(err)
		}
	}
}

// droppedDuring says whether the client dropped replies on the
// subscription since c started. The incidents' dropped count follows the
// subscription's (once each, however many calls a drop fails); only this
// mux sets it, with x.mu held.
func (x *replyMux) droppedDuring(c *readCall) bool {
	d, _ := x.sub.Dropped()
	if n := int64(d); n > x.w.incidents.dropped.Load() {
		x.w.incidents.dropped.Store(n)
	}
	return d != c.dropped
}

// incidents counts what went wrong below the world contract on this
// world's connection: the figures behind world.Incidents.
type incidents struct {
	dropped    atomic.Int64
	slow       atomic.Int64
	timeouts   atomic.Int64
	gaps       atomic.Int64
	disconnect atomic.Int64
	reconnect  atomic.Int64
	asyncErrs  atomic.Int64
	transient  atomic.Int64
	last       atomic.Pointer[string] // the last incident's error, for a person to read
}

// Incidents returns the world's incident counts so far.
func (w *World) Incidents() world.Incidents {
	i := &w.incidents
	out := world.Incidents{
		Dropped:      i.dropped.Load(),
		SlowConsumer: i.slow.Load(),
		Timeouts:     i.timeouts.Load(),
		Gaps:         i.gaps.Load(),
		Disconnects:  i.disconnect.Load(),
		Reconnects:   i.reconnect.Load(),
		AsyncErrors:  i.asyncErrs.Load(),
		Transient:    i.transient.Load(),
	}
	if p := i.last.Load(); p != nil {
		out.Last = *p
	}
	return out
}

// asyncError is the connection's error handler: nats.go reports slow
// consumers and other asynchronous errors here (its default prints them
// to stderr). A slow consumer on the reply mux fails the reads in flight.
func (w *World) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	msg := err.Error()
	if sub != nil {
		msg = fmt.Sprintf("%s (subscription %s)", msg, sub.Subject)
	}
	w.incidents.last.Store(&msg)
	if !errors.Is(err, nats.ErrSlowConsumer) {
		w.incidents.asyncErrs.Add(1)
		return
	}
	w.incidents.slow.Add(1)
	if x := w.replies; x != nil && sub == x.sub {
		x.failDropped(fmt.Errorf("natsworld: direct get: %w", ErrDropped))
	}
}

// count records err, returned by a world call, among the incidents.
func (w *World) count(err error) {
	if err == nil {
		return
	}
	switch {
	case errors.Is(err, ErrGap):
		w.incidents.gaps.Add(1)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		w.incidents.timeouts.Add(1)
	}
	if errors.Is(err, world.ErrTransient) {
		w.incidents.transient.Add(1)
	}
	msg := err.Error()
	w.incidents.last.Store(&msg)
}
