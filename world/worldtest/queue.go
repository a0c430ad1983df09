package worldtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/durabench/durabench/world"
)

var queueTests = []subtest{
	{name: "PublishConsume", opts: queueOptions(world.Redeliver), fn: testPublishConsume},
	{name: "IdempotentPublish", opts: queueOptions(world.Redeliver), fn: testIdempotentPublish},
	{name: "Delay", opts: queueOptions(world.Redeliver), fn: testDelay},
	{name: "RetryRedeliver", opts: queueOptions(world.Redeliver), fn: testRetryRedeliver},
	{name: "RetryFresh", opts: queueOptions(world.Fresh), fn: testRetryFresh},
	{name: "BackoffRedeliver", opts: queueOptions(world.Redeliver), fn: testBackoffRedeliver},
	{name: "BackoffFresh", opts: queueOptions(world.Fresh), fn: testBackoffFresh},
	{name: "AbandonRedeliver", opts: queueOptions(world.Redeliver), fn: testAbandon},
	{name: "AbandonFresh", opts: queueOptions(world.Fresh), fn: testAbandon},
	{name: "SlowHandler", opts: queueOptions(world.Redeliver), fn: testSlowHandler},
	{name: "Concurrency", opts: queueOptions(world.Redeliver), fn: testConcurrency},
	{name: "Burst", opts: queueOptions(world.Redeliver), fn: testBurst},
	{name: "SharedConsumers", opts: queueOptions(world.Redeliver), fn: testSharedConsumers},
	{name: "Stop", opts: queueOptions(world.Redeliver), fn: testStop},
}

var errHandler = errors.New("worldtest: handler failure")

// waitCount waits until rec holds n deliveries.
func (c *env) waitCount(rec *recorder, n int, what string) []delivered {
	c.T.Helper()
	if !c.WaitFor(deadline, func() bool { return rec.count() >= n }) {
		c.Fatalf("%s: %d deliveries after %v, want %d: %+v", what, rec.count(), deadline, n, rec.snapshot())
	}
	return rec.snapshot()
}

// testPublishConsume: every message is delivered once, intact, attempt 1.
func testPublishConsume(c *env) {
	const n = 20
	rec := &recorder{}
	sub := c.consume(4, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		return nil
	})
	defer c.stop(sub)
	for i := range n {
		if c.publish(world.Message{ID: fmt.Sprintf("m%d", i), Run: fmt.Sprintf("run%d", i%3), Body: []byte{byte(i)}}, 0) {
			c.Fatalf("first publish of m%d reported duplicate", i)
		}
	}
	c.waitCount(rec, n, "publish/consume")
	c.Settle(settleWait)
	got := rec.snapshot()
	if len(got) != n {
		c.Fatalf("%d deliveries, want %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, d := range got {
		var i int
		if _, err := fmt.Sscanf(d.ID, "m%d", &i); err != nil || seen[d.ID] {
			c.Fatalf("unexpected or repeated delivery %+v", d)
		}
		seen[d.ID] = true
		if d.Attempt != 1 || d.Run != fmt.Sprintf("run%d", i%3) || len(d.Body) != 1 || d.Body[0] != byte(i) {
			c.Fatalf("delivery %+v: want attempt 1, run run%d, body [%d]", d.Delivery, i%3, i)
		}
	}
}

// testIdempotentPublish: a message ID is published once for the world's
// life, however often it is published again, before or after delivery.
func testIdempotentPublish(c *env) {
	if c.publish(world.Message{ID: "x", Body: []byte("1")}, 0) {
		c.Fatalf("first publish of x reported duplicate")
	}
	if !c.publish(world.Message{ID: "x", Body: []byte("2")}, 0) {
		c.Fatalf("second publish of x not reported as duplicate")
	}
	rec := &recorder{}
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		return nil
	})
	defer c.stop(sub)
	c.waitCount(rec, 1, "idempotent publish")
	if !c.publish(world.Message{ID: "x", Body: []byte("3")}, 0) {
		c.Fatalf("publish of x after its delivery not reported as duplicate")
	}
	c.publish(world.Message{ID: "y"}, 0)
	c.waitCount(rec, 2, "idempotent publish")
	c.Settle(settleWait)
	got := rec.snapshot()
	if len(got) != 2 || got[0].ID != "x" || string(got[0].Body) != "1" || got[1].ID != "y" {
		c.Fatalf("deliveries %+v, want x (body 1) once, then y", got)
	}
}

// testDelay: a delayed message is not delivered before its delay, and does
// not hold back messages published after it.
func testDelay(c *env) {
	const delay = 250 * time.Millisecond
	rec := &recorder{}
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		return nil
	})
	defer c.stop(sub)
	start := c.RT.Now()
	c.publish(world.Message{ID: "late"}, delay)
	c.publish(world.Message{ID: "now"}, 0)
	published := c.RT.Now() - start
	got := c.waitCount(rec, 2, "delayed publish")
	// The order says something only when "now" was published before
	// "late" was due (two publishes can take longer on a loaded machine).
	if published < delay && (got[0].ID != "now" || got[1].ID != "late") {
		c.Fatalf("delivery order %s, %s: want now, late", got[0].ID, got[1].ID)
	}
	if got[1].ID != "late" {
		got[0], got[1] = got[1], got[0]
	}
	if at := got[1].At - start; at < delay {
		c.Fatalf("delayed message delivered after %v, before its delay %v", at, delay)
	}
	if got[1].Attempt != 1 {
		c.Fatalf("delayed message attempt %d, want 1", got[1].Attempt)
	}
}

// testRetryRedeliver: with Redeliver, a failed delivery comes back as the
// same message with attempt 2 after the retry delay — well before the
// visibility timeout.
func testRetryRedeliver(c *env) {
	if caps := c.W.Capabilities(); caps.RetryStyle != world.Redeliver || caps.VisibilityTimeout != VisibilityTimeout {
		c.Fatalf("Capabilities = %+v, want Redeliver with VT %v", caps, VisibilityTimeout)
	}
	rec := &recorder{}
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		if rec.add(d, c.RT.Now()) == 1 {
			return errHandler
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m", Run: "r", Body: []byte("b")}, 0)
	got := c.waitCount(rec, 2, "redeliver after failure")
	if got[0].Attempt != 1 || got[1].Attempt != 2 || got[1].ID != "m" || got[1].Run != "r" || string(got[1].Body) != "b" {
		c.Fatalf("deliveries %+v, want m attempt 1 then m attempt 2", got)
	}
	if gap := got[1].At - got[0].At; gap >= VisibilityTimeout*2/3 {
		c.Fatalf("retry came %v after the failure: a nak must not wait for the visibility timeout (%v)", gap, VisibilityTimeout)
	}
	c.Settle(settleWait)
	if n := rec.count(); n != 2 {
		c.Fatalf("%d deliveries after the ack, want 2", n)
	}
}

// testRetryFresh: with Fresh, a failed delivery is retried soon by a copy
// whose attempt is 1, and the original comes back with attempt 2 only after
// the visibility timeout — the 300 s stall of the reference write-up.
func testRetryFresh(c *env) {
	if caps := c.W.Capabilities(); caps.RetryStyle != world.Fresh {
		c.Fatalf("Capabilities().RetryStyle = %q, want fresh", caps.RetryStyle)
	}
	rec := &recorder{}
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		if rec.add(d, c.RT.Now()) == 1 {
			return errHandler
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m", Body: []byte("b")}, 0)
	got := c.waitCount(rec, 3, "fresh retry")
	first, fresh, orig := got[0], got[1], got[2]
	if first.Attempt != 1 || fresh.Attempt != 1 || orig.Attempt != 2 {
		c.Fatalf("attempts %d, %d, %d: want 1 (failed), 1 (fresh copy), 2 (original after the VT)", first.Attempt, fresh.Attempt, orig.Attempt)
	}
	for _, d := range got[1:] {
		if d.ID != "m" || string(d.Body) != "b" {
			c.Fatalf("retry %+v is not a copy of m", d.Delivery)
		}
	}
	if gap := fresh.At - first.At; gap >= VisibilityTimeout*2/3 {
		c.Fatalf("fresh copy came %v after the failure, want soon (VT %v)", gap, VisibilityTimeout)
	}
	if gap := orig.At - first.At; gap < vtEarliest {
		c.Fatalf("original redelivered %v after the failure, want only after the visibility timeout %v", gap, VisibilityTimeout)
	}
	c.Settle(settleWait)
	if n := rec.count(); n != 3 {
		c.Fatalf("%d deliveries after both acks, want 3", n)
	}
}

// testAbandon: ErrAbandon leaves the delivery unacknowledged; it comes back
// with attempt+1 after the visibility timeout, whatever the retry style.
func testAbandon(c *env) {
	rec := &recorder{}
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		if rec.add(d, c.RT.Now()) == 1 {
			return fmt.Errorf("crashed: %w", world.ErrAbandon)
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m"}, 0)
	got := c.waitCount(rec, 2, "redelivery after abandon")
	if got[0].Attempt != 1 || got[1].Attempt != 2 || got[1].ID != "m" {
		c.Fatalf("deliveries %+v, want m attempt 1 then m attempt 2", got)
	}
	if gap := got[1].At - got[0].At; gap < vtEarliest {
		c.Fatalf("abandoned delivery came back after %v, before the visibility timeout %v", gap, VisibilityTimeout)
	}
	c.Settle(settleWait)
	if n := rec.count(); n != 2 {
		c.Fatalf("%d deliveries, want 2", n)
	}
}

// testSlowHandler: a handler still running past the visibility timeout does
// not hold the message: it is redelivered (attempt 2) while the first
// handler runs (at-least-once).
func testSlowHandler(c *env) {
	rec := &recorder{}
	sub := c.consume(4, func(ctx context.Context, d world.Delivery) error {
		rec.enter()
		defer rec.leave()
		if rec.add(d, c.RT.Now()) == 1 {
			return c.RT.Sleep(ctx, VisibilityTimeout*2)
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m"}, 0)
	got := c.waitCount(rec, 2, "redelivery of a slow delivery")
	if got[1].Attempt != 2 || got[1].ID != "m" {
		c.Fatalf("second delivery %+v, want m attempt 2", got[1].Delivery)
	}
	if gap := got[1].At - got[0].At; gap < vtEarliest || gap >= VisibilityTimeout*2 {
		c.Fatalf("redelivered %v after the first delivery, want after the visibility timeout %v, before the slow handler returned", gap, VisibilityTimeout)
	}
	if !c.WaitFor(deadline, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.live == 0 }) {
		c.Fatalf("slow handler did not return")
	}
	c.Settle(settleWait)
	if n := rec.count(); n != 2 {
		c.Fatalf("%d deliveries after both handlers acked, want 2", n)
	}
}

// testConcurrency: no more than Concurrency handlers run at once, and more
// than one does.
func testConcurrency(c *env) {
	const conc, n = 3, 24
	rec := &recorder{}
	sub := c.consume(conc, func(ctx context.Context, d world.Delivery) error {
		rec.enter()
		defer rec.leave()
		rec.add(d, c.RT.Now())
		return c.RT.Sleep(ctx, 10*time.Millisecond)
	})
	defer c.stop(sub)
	for i := range n {
		c.publish(world.Message{ID: fmt.Sprintf("m%d", i)}, 0)
	}
	c.waitCount(rec, n, "concurrency")
	rec.mu.Lock()
	peak := rec.peak
	rec.mu.Unlock()
	if peak > conc {
		c.Fatalf("%d handlers ran at once, Concurrency is %d", peak, conc)
	}
	if peak < 2 {
		c.Fatalf("handlers never overlapped (peak %d) with Concurrency %d", peak, conc)
	}
}

// testSharedConsumers: several consumers share the messages: each message
// goes to one of them.
func testSharedConsumers(c *env) {
	const n = 30
	rec := &recorder{}
	for range 3 {
		sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
			rec.add(d, c.RT.Now())
			return c.RT.Sleep(ctx, time.Millisecond)
		})
		defer c.stop(sub)
	}
	for i := range n {
		c.publish(world.Message{ID: fmt.Sprintf("m%d", i)}, 0)
	}
	c.waitCount(rec, n, "shared consumers")
	c.Settle(settleWait)
	got := rec.snapshot()
	ids := make([]string, len(got))
	for i, d := range got {
		ids[i] = d.ID
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != n || len(got) != n {
		c.Fatalf("%d deliveries of %d distinct messages, want %d of %d", len(got), len(slices.Compact(ids)), n, n)
	}
}

// testStop: Stop waits for running handlers; nothing is delivered to a
// stopped consumer, and its messages go to the next one.
func testStop(c *env) {
	rec := &recorder{}
	finished := 0
	sub := c.consume(2, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		if err := c.RT.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
		rec.mu.Lock()
		finished++
		rec.mu.Unlock()
		return nil
	})
	c.publish(world.Message{ID: "a"}, 0)
	c.waitCount(rec, 1, "before Stop")
	c.NoErr(sub.Stop(c.Ctx), "Stop")
	rec.mu.Lock()
	done := finished
	rec.mu.Unlock()
	if done != 1 {
		c.Fatalf("Stop returned before its running handler finished")
	}
	c.NoErr(sub.Stop(c.Ctx), "second Stop")
	c.publish(world.Message{ID: "b"}, 0)
	c.Settle(settleWait)
	if n := rec.count(); n != 1 {
		c.Fatalf("%d deliveries, want none after Stop", n)
	}
	next := &recorder{}
	sub2 := c.consume(1, func(ctx context.Context, d world.Delivery) error {
		next.add(d, c.RT.Now())
		return nil
	})
	defer c.stop(sub2)
	got := c.waitCount(next, 1, "after Stop, a new consumer")
	if got[0].ID != "b" || got[0].Attempt != 1 {
		c.Fatalf("new consumer got %+v, want b attempt 1", got[0].Delivery)
	}
}

// wantBackoff checks that consecutive deliveries are at least
// RetryDelay, 2×RetryDelay, 4×RetryDelay... apart (less a tenth, for
// clock granularity).
func (c *env) wantBackoff(ds []delivered) {
	c.T.Helper()
	want := RetryDelay
	for i := 1; i < len(ds); i++ {
		if gap := ds[i].At - ds[i-1].At; gap < want*9/10 {
			c.Fatalf("retry %d came %v after the failure, want at least %v (RetryDelay doubling per failure)", i, gap, want)
		}
		want *= 2
	}
}

// testBackoffRedeliver: the nak delay doubles with each failure of the
// message; attempts count up.
func testBackoffRedeliver(c *env) {
	const failures = 4
	rec := &recorder{}
	sub := c.consume(1, func(ctx context.Context, d world.Delivery) error {
		if rec.add(d, c.RT.Now()) <= failures {
			return errHandler
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m"}, 0)
	got := c.waitCount(rec, failures+1, "redeliveries with backoff")
	for i, d := range got {
		if d.ID != "m" || d.Attempt != i+1 {
			c.Fatalf("delivery %d = %+v, want m attempt %d", i, d.Delivery, i+1)
		}
	}
	c.wantBackoff(got)
	c.Settle(settleWait)
	if n := rec.count(); n != failures+1 {
		c.Fatalf("%d deliveries after the ack, want %d", n, failures+1)
	}
}

// testBackoffFresh: each failed delivery publishes a fresh copy (attempt 1,
// delay doubling along the lineage) and stays unacknowledged itself, so
// every failed delivery — the original and each failed copy — comes back
// with attempt 2 after the visibility timeout.
func testBackoffFresh(c *env) {
	const failures = 3
	rec := &recorder{}
	sub := c.consume(4, func(ctx context.Context, d world.Delivery) error {
		if d.Attempt == 1 && rec.add(d, c.RT.Now()) <= failures {
			return errHandler
		}
		if d.Attempt > 1 {
			rec.add(d, c.RT.Now())
		}
		return nil
	})
	defer c.stop(sub)
	c.publish(world.Message{ID: "m"}, 0)
	c.waitCount(rec, 2*failures+1, "fresh copies and redeliveries")
	c.Settle(settleWait)
	got := rec.snapshot()
	var firsts, seconds []delivered
	for _, d := range got {
		if d.ID != "m" {
			c.Fatalf("delivery %+v is not m", d.Delivery)
		}
		switch d.Attempt {
		case 1:
			firsts = append(firsts, d)
		case 2:
			seconds = append(seconds, d)
		default:
			c.Fatalf("delivery with attempt %d: only failed deliveries come back, once", d.Attempt)
		}
	}
	if len(firsts) != failures+1 || len(seconds) != failures {
		c.Fatalf("%d deliveries with attempt 1 and %d with attempt 2, want %d and %d: %+v",
			len(firsts), len(seconds), failures+1, failures, got)
	}
	c.wantBackoff(firsts)
	for _, d := range seconds {
		if gap := d.At - firsts[0].At; gap < vtEarliest {
			c.Fatalf("a failed delivery came back with attempt 2 after %v, before the visibility timeout %v", gap, VisibilityTimeout)
		}
	}
}

// testBurst: a burst as a 256-branch fan-out dispatches it, published from
// concurrent tasks, is delivered exactly once per message, attempt 1.
func testBurst(c *env) {
	const n, publishers = 256, 8
	rec := &recorder{}
	sub := c.consume(64, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		return nil
	})
	defer c.stop(sub)
	g := c.RT.NewGroup()
	for p := range publishers {
		g.Go(func() error {
			for i := p; i < n; i += publishers {
				if _, err := c.W.Publish(c.Ctx, world.Message{ID: fmt.Sprintf("m%d", i), Run: "r"}, world.PublishOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	c.NoErr(g.Wait(), "concurrent publish")
	c.waitCount(rec, n, "burst")
	c.Settle(settleWait)
	got := rec.snapshot()
	seen := make(map[string]bool, n)
	for _, d := range got {
		if seen[d.ID] || d.Attempt != 1 {
			c.Fatalf("delivery %+v: repeated or not attempt 1", d.Delivery)
		}
		seen[d.ID] = true
	}
	if len(got) != n {
		c.Fatalf("%d deliveries, want %d", len(got), n)
	}
}
