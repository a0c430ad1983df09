package natsworld

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// Headers of retried and delayed queue messages. The message's id and run
// travel in the body (see encodeMessage), not in headers: a plain publish
// then carries only Nats-Msg-Id, like a raw JetStream publish.
const (
	hdrFailures = "Durabench-Failures" // failed deliveries of earlier copies in the lineage
	hdrReadyAt  = "Durabench-Ready-At" // unix ns; delayed messages only
)

// maxPull caps how many messages a consumer buffers client-side. A buffered
// message's visibility timeout is already running, so the buffer stays
// small: it only holds messages while every handler slot is busy.
const maxPull = 16

// NextWait bounds one wait for a message, so a pull loop notices Stop even
// when the server is gone and a drain cannot complete — and, above all, so
// that it asks for more messages in time: the jetstream iterator decides
// whether to send a new pull request only when Next starts or a message
// arrives, and skips it while its previous request is still being sent. A
// Next that began in that window waits out its whole timeout while the
// consumer holds messages and the server no pull request (seen against a
// server over TCP: a 256-branch fan-out's step messages sat undelivered for
// exactly the 1 s this used to be, in ~1 run in 20). At 10 ms the gap is
// bounded by 10 ms; an idle loop wakes 100 times a second, which costs
// nothing measurable.
const NextWait = 10 * time.Millisecond

// moverConcurrency bounds concurrent moves of due delayed messages.
const moverConcurrency = 32

// Publish enqueues m. Without a delay it goes straight to the work-queue
// subject; with a delay it goes to the delayed subject, from which a
// consumer moves it to the work queue once due (see Consume). Both subjects
// are in one stream, so Nats-Msg-Id deduplicates across them.
func (w *World) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	const op = "publish"
	if err := w.check(op); err != nil {
		return false, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	msg := w.queueMsg(m, 0, opt.Delay)
	if m.ID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	}
	ack, err := w.publish(ctx, msg)
	if err != nil {
		return false, w.err(ctx, op, err)
	}
	return ack.Duplicate, nil
}

// queueMsg builds the stored form of m.
func (w *World) queueMsg(m world.Message, failures int, delay time.Duration) *nats.Msg {
	subj := w.subjReady
	if delay > 0 {
		subj = w.subjDelayed
	}
	msg := nats.NewMsg(subj)
	msg.Data = encodeMessage(m)
	if failures > 0 {
		msg.Header.Set(hdrFailures, strconv.Itoa(failures))
	}
	if delay > 0 {
		msg.Header.Set(hdrReadyAt, strconv.FormatInt(time.Now().Add(delay).UnixNano(), 10))
	}
	return msg
}

// subscription is a running consumer: a pull loop on the "ready" consumer
// feeding up to Concurrency handlers, and a mover on the "delayed" consumer.
type subscription struct {
	w       *World
	h       world.Handler
	ctx     context.Context // handlers' context; cancelled by Close
	cancel  context.CancelFunc
	slots   chan struct{}
	ready   *puller
	delayed *puller

	stopping chan struct{}
	stopOnce sync.Once
	loops    sync.WaitGroup
	handlers sync.WaitGroup
}

// Consume starts pulling from the work queue. Each delivery's Attempt is the
// consumer's NumDelivered for that message: the first delivery is 1, each
// redelivery (nak, or visibility timeout = AckWait) adds one, and a fresh
// copy is a new message whose count starts at 1 again.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	const op = "consume"
	if err := w.check(op); err != nil {
		return nil, err
	}
	if opt.Concurrency < 1 {
		opt.Concurrency = 1
	}
	hctx, cancel := context.WithCancel(ctx)
	s := &subscription{
		w: w, h: h, ctx: hctx, cancel: cancel,
		slots:    make(chan struct{}, opt.Concurrency),
		stopping: make(chan struct{}),
	}
	var err error
	s.ready, err = newPuller(w.nc, w.queueStream, "ready", min(opt.Concurrency, maxPull), w.shared)
	if err != nil {
		cancel()
		return nil, w.err(ctx, op, err)
	}
	s.delayed, err = newPuller(w.nc, w.queueStream, "delayed", 64, w.shared)
	if err != nil {
		s.ready.stop(0)
		cancel()
		return nil, w.err(ctx, op, err)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		s.ready.stop(0)
		s.delayed.stop(0)
		cancel()
		return nil, fmt.Errorf("natsworld: %s: %w", op, world.ErrClosed)
	}
	w.subs[s] = struct{}{}
	w.mu.Unlock()

	s.loops.Add(2)
	go s.pull()
	go s.move()
	go func() {
		select {
		case <-ctx.Done():
			s.halt()
		case <-s.stopping:
		}
	}()
	return s, nil
}

// halt stops pulling. Each loop then stops its puller, which hands back
// (nak) every message delivered to it and not handled — buffered, or sent
// by the server for a request still open — so they come back at once
// instead of after the visibility timeout.
func (s *subscription) halt() {
	s.stopOnce.Do(func() {
		s.ready.quit()
		s.delayed.quit()
		close(s.stopping)
	})
}

// stopLimit bounds how long a stopping puller waits for its open pull
// requests to end (they expire within pullExpiry).
const stopLimit = pullExpiry + pullGrace

// Stop stops pulling and waits for running handlers.
func (s *subscription) Stop(ctx context.Context) error {
	s.halt()
	done := make(chan struct{})
	go func() {
		s.loops.Wait()
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.w.mu.Lock()
	delete(s.w.subs, s)
	s.w.mu.Unlock()
	return nil
}

func (s *subscription) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// pull hands messages to handlers, never more at once than the handler
// slots.
func (s *subscription) pull() {
	defer s.loops.Done()
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.stopping:
			s.ready.stop(stopLimit)
			return
		}
		msg, err := s.ready.next(NextWait)
		if msg == nil {
			<-s.slots
			if s.isStopping() {
				s.ready.stop(stopLimit)
				return
			}
			if err != nil {
				s.pause()
			}
			continue
		}
		if s.isStopping() {
			<-s.slots
			_ = msg.Nak()
			continue
		}
		s.handlers.Add(1)
		s.w.rt.Go(func() {
			defer s.handlers.Done()
			defer func() { <-s.slots }()
			s.handle(msg)
		})
	}
}

// pause backs off after a pull error (server gone, leader change).
func (s *subscription) pause() {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stopping:
	}
}

func (s *subscription) handle(msg *nats.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Nak()
		return
	}
	m, err := decodeMessage(msg.Data)
	if err != nil {
		// Not ours: drop it rather than redeliver it forever.
		_ = msg.Term()
		return
	}
	d := world.Delivery{Message: m, Attempt: int(meta.NumDelivered)}
	herr := s.h(s.ctx, d)
	switch {
	case herr == nil:
		_ = msg.Ack()
	case errors.Is(herr, world.ErrAbandon):
		// No ack, no nak: redelivered after AckWait, the visibility timeout.
	default:
		s.retry(msg, meta, d)
	}
}

// retry applies the world's retry style to a failed delivery.
func (s *subscription) retry(msg *nats.Msg, meta *nats.MsgMetadata, d world.Delivery) {
	opts := s.w.cfg.Options
	prior, _ := strconv.Atoi(msg.Header.Get(hdrFailures))
	failures := prior + int(meta.NumDelivered)
	delay := opts.RetryDelay
	for i := 1; i < failures && delay < opts.VisibilityTimeout; i++ {
		delay *= 2
	}
	delay = min(delay, opts.VisibilityTimeout)
	if opts.RetryStyle == world.Redeliver {
		_ = msg.NakWithDelay(delay)
		return
	}
	// Fresh: a new message (attempt 1) after the delay; the original is
	// left unacknowledged and comes back only after the visibility timeout.
	fresh := s.w.queueMsg(d.Message, failures, delay)
	fresh.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("fresh/%d.%d", meta.Sequence.Stream, meta.NumDelivered))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := s.w.publish(ctx, fresh); err != nil {
		// Nothing better to do: the original still comes back after the
		// visibility timeout.
		return
	}
}

// move forwards due delayed messages to the work queue. A message that is
// not due yet is nak'ed with the remaining delay, so the server holds it;
// the copy on the work-queue subject is a new message, so its deliveries
// count attempts from 1. Its Nats-Msg-Id is derived from the delayed
// message's stream sequence, so a move retried after a crash is
// deduplicated.
func (s *subscription) move() {
	defer s.loops.Done()
	sem := make(chan struct{}, moverConcurrency)
	var moving sync.WaitGroup
	defer moving.Wait()
	for {
		msg, err := s.delayed.next(NextWait)
		if msg == nil {
			if s.isStopping() {
				s.delayed.stop(stopLimit)
				return
			}
			if err != nil {
				s.pause()
			}
			continue
		}
		if s.isStopping() {
			_ = msg.Nak()
			continue
		}
		hdr := msg.Header
		readyAt, _ := strconv.ParseInt(hdr.Get(hdrReadyAt), 10, 64)
		if wait := time.Until(time.Unix(0, readyAt)); wait > 0 {
			_ = msg.NakWithDelay(wait)
			continue
		}
		sem <- struct{}{}
		moving.Add(1)
		go func() {
			defer moving.Done()
			defer func() { <-sem }()
			s.forward(msg)
		}()
	}
}

func (s *subscription) forward(msg *nats.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Nak()
		return
	}
	hdr := msg.Header
	out := nats.NewMsg(s.w.subjReady)
	out.Data = msg.Data
	if v := hdr.Get(hdrFailures); v != "" {
		out.Header.Set(hdrFailures, v)
	}
	out.Header.Set(jetstream.MsgIDHeader, "ready/"+strconv.FormatUint(meta.Sequence.Stream, 10))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := s.w.publish(ctx, out); err != nil {
		_ = msg.NakWithDelay(100 * time.Millisecond)
		return
	}
	_ = msg.Ack()
}
