package natsworld

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// logSequencer pipelines publishes to the log stream when this process is
// its only writer (the embedded server). It predicts the stream sequence
// each message will get (the stream's last sequence plus the messages sent
// before it), so an append can carry the *predicted* sequence of the run's
// previous event as its expected-last-subject-sequence and be sent before
// that event's ack is back: chained expected sequences. The server still
// checks every link, so a wrong prediction can only make an append fail
// with "wrong last sequence" (then the run's cache is rebuilt from the
// stream and the append retried), never store an event out of order.
//
// With one writer, predictions can only overcount (a rejected or
// deduplicated message takes no sequence). Then an append whose expectation
// holds was stored right after the previous link, which was stored right
// after its own, and so on: its position and pending count are exact. A
// message stored at a higher sequence than predicted means another writer
// (impossible embedded: the server does not listen); the sequencer then
// turns itself off and appends fall back to one round trip each.
// After any surprise the sequencer waits until nothing is in flight and
// reads the stream's last sequence again.
type logSequencer struct {
	w        *World
	off      atomic.Bool // another writer was seen: stop pipelining
	mu       sync.Mutex
	cond     *sync.Cond
	valid    bool
	next     uint64 // predicted sequence of the next message
	inflight int
}

func newLogSequencer(w *World) *logSequencer {
	s := &logSequencer{w: w}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// send publishes msg asynchronously; prepare is called with the message's
// predicted sequence before it is sent, under the sequencer's lock, so send
// order is prediction order. The caller must pass the future's outcome to
// done.
func (s *logSequencer) send(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.valid {
		if s.inflight > 0 {
			s.cond.Wait()
			continue
		}
		st, err := s.w.js.Stream(ctx, s.w.logStream)
		if err != nil {
			return nil, 0, err
		}
		s.next = st.CachedInfo().State.LastSeq + 1
		s.valid = true
	}
	pred := s.next
	fut, err := s.w.js.PublishMsgAsync(msg)
	if err != nil {
		s.valid = false
		return nil, 0, err
	}
	s.next++
	s.inflight++
	return fut, pred, nil
}

// done records the outcome of a message sent with prediction pred.
func (s *logSequencer) done(pred uint64, ack *jetstream.PubAck, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if err != nil || ack == nil || ack.Duplicate || ack.Sequence != pred {
		s.valid = false
	}
	if ack != nil && !ack.Duplicate && ack.Sequence > pred {
		s.off.Store(true)
	}
	s.cond.Broadcast()
}

// wait waits for fut; if ctx ends first, the outcome is still recorded when
// it arrives (the async publish timeout bounds that).
func (s *logSequencer) wait(ctx context.Context, fut jetstream.PubAckFuture, pred uint64) (*jetstream.PubAck, error) {
	select {
	case ack := <-fut.Ok():
		s.done(pred, ack, nil)
		return ack, nil
	case err := <-fut.Err():
		s.done(pred, nil, err)
		return nil, err
	case <-ctx.Done():
		go func() {
			select {
			case ack := <-fut.Ok():
				s.done(pred, ack, nil)
			case err := <-fut.Err():
				s.done(pred, nil, err)
			}
		}()
		return nil, ctx.Err()
	}
}

// publish is a synchronous publish through the sequencer.
func (s *logSequencer) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	fut, pred, err := s.send(ctx, msg)
	if err != nil {
		return nil, err
	}
	return s.wait(ctx, fut, pred)
}

// logPublish publishes msg to the log stream and waits for its ack: through
// the sequencer when pipelining, so predictions stay exact.
func (w *World) logPublish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	if w.pipelined() {
		return w.seq.publish(ctx, msg)
	}
	return w.publish(ctx, msg)
}

// pipelined reports whether log appends are pipelined.
func (w *World) pipelined() bool { return w.seq != nil && !w.seq.off.Load() }

// reset forgets everything the cache holds, so the next catch-up rebuilds
// it from the stream. Used when an optimistically applied event may not
// have been stored. Caller holds rs.mu.
func (rs *runState) reset() {
	rs.dirty = true
	rs.lastSeq, rs.count, rs.status, rs.pending = 0, 0, "", 0
	rs.ids = make(map[string]int64)
	rs.steps = make(map[string]uint8)
	rs.hooks = make(map[string]bool)
}

// appendPipelined is Append on a world whose log has no other writer: the
// event is checked and applied to the cache, sent with the chained
// expected sequence, and the run's lock released before the ack is back,
// so concurrent appends to one run share round trips.
func (w *World) appendPipelined(ctx context.Context, rs *runState, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	op := "append " + ev.Kind.String()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var claimed bool
	for round := 0; round < maxCASRounds; round++ {
		if rs.dirty || !rs.exists() {
			for rs.inflight > 0 {
				rs.cond.Wait()
			}
			if rs.broken {
				rs.reset()
				rs.broken = false
			}
			if err := w.catchUp(ctx, rs, 0); err != nil {
				rs.dirty = true
				return world.AppendResult{}, w.err(ctx, op, err)
			}
		}
		res, done, err := w.checkAppend(rs, ev, pre)
		if err == errStale && !rs.dirty && round == 0 {
			rs.dirty = true
			continue
		}
		if err == errStale {
			err = world.ErrPrecondition
		}
		if err != nil {
			w.releaseHook(ctx, claimed, ev.Entity)
			return world.AppendResult{}, fmt.Errorf("natsworld: %s to run %q: %w", op, run, err)
		}
		if done {
			if rs.inflight > 0 {
				// The cache holds this run's appends still in flight: the
				// event may be one of them, sent but not yet stored, and
				// "it is in the log" would not be true yet for the caller's
				// next read (a lazily resumed hook's activation read its
				// own re-ensured hook_received as a duplicate, reloaded, did
				// not find it and left the run waiting for good). Wait for
				// them and check again against what was stored.
				for rs.inflight > 0 {
					rs.cond.Wait()
				}
				continue
			}
			return res, nil
		}
		if err := w.claimNewHook(ctx, run, ev, &claimed); err != nil {
			return world.AppendResult{}, w.err(ctx, op, err)
		}
		msg := rs.appendMsg(run, ev)
		fut, pred, err := w.seq.send(ctx, msg)
		if err != nil {
			rs.dirty = true
			return world.AppendResult{}, w.err(ctx, op, err)
		}
		rs.apply(ev, pred)
		res = world.AppendResult{Pos: rs.count, Pending: rs.pending}
		rs.inflight++
		rs.mu.Unlock()
		ack, err := w.seq.wait(ctx, fut, pred)
		rs.mu.Lock()
		rs.inflight--
		rs.cond.Broadcast()
		switch {
		case err == nil && !ack.Duplicate:
			// Stored, and the server checked the chain: Pos is right.
			if ack.Sequence != pred {
				// Later links expect pred: they fail and retry; the
				// cache is rebuilt once they are all back.
				rs.dirty, rs.broken = true, true
			}
			if ev.Kind == world.RunCompleted || ev.Kind == world.RunFailed {
				w.retire(run)
			}
			return res, nil
		case err == nil, isWrongLastSeq(err):
			// A duplicate (an earlier attempt landed) or a broken chain:
			// the optimistic state is wrong; rebuild and check again.
			rs.dirty, rs.broken = true, true
		default:
			rs.dirty, rs.broken = true, true
			return world.AppendResult{}, w.err(ctx, op, err)
		}
	}
	return world.AppendResult{}, fmt.Errorf("natsworld: %s to run %q: lost %d compare-and-swap rounds: %w",
		op, run, maxCASRounds, world.ErrTransient)
}
