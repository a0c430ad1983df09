package natsworld

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// appendSteps creates run r with n step_created events after run_created.
func appendSteps(t *testing.T, w *World, r string, n int) {
	t.Helper()
	ctx := context.Background()
	if err := w.CreateRun(ctx, world.Run{ID: r}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := world.Event{Kind: world.StepCreated, Entity: fmt.Sprint(i), ID: fmt.Sprint("c", i)}
		if _, err := w.Append(ctx, r, ev, world.Precondition{}); err != nil {
			t.Fatal(err)
		}
	}
}

// stallMux holds the reply mux's lock, so its handler cannot take
// replies and the subscription's pending messages pile up, until release
// is called.
func stallMux(w *World) (release func()) {
	w.replies.mu.Lock()
	var once sync.Once
	return func() { once.Do(w.replies.mu.Unlock) }
}

// stallPeriodically holds the reply mux's handler up for 3 ms in every 8
// until the returned stop is called.
func stallPeriodically(w *World) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			release := stallMux(w)
			time.Sleep(3 * time.Millisecond)
			release()
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// TestDroppedReplyFailsTransient: the client drops replies of log reads (a
// real slow consumer: the reply subscription's pending limit is cut to 8
// messages and its handler held up now and then while 201-event logs
// stream in). Every read either returns the whole log or fails within a
// second with a transient ErrDropped — never a shorter log, never a 10 s
// wait for an end of batch that was dropped — the drops are counted, and
// once the limit is back every read returns the whole log.
func TestDroppedReplyFailsTransient(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	appendSteps(t, w, "r", 200)
	if err := w.replies.sub.SetPendingLimits(8, -1); err != nil {
		t.Fatal(err)
	}
	stop := stallPeriodically(w)
	failed := 0
	for i := 0; i < 400 && failed < 5; i++ {
		began := time.Now()
		evs, err := w.Load(ctx, "r")
		if took := time.Since(began); took > time.Second {
			t.Errorf("read %d took %s", i, took)
		}
		switch {
		case err == nil && len(evs) != 201:
			t.Fatalf("read %d returned %d events and no error; want 201", i, len(evs))
		case err != nil && (!errors.Is(err, ErrDropped) || !world.IsTransient(err)):
			t.Fatalf("read %d: %v; want ErrDropped, transient", i, err)
		case err != nil:
			failed++
		}
	}
	stop()
	if failed == 0 {
		t.Fatal("no read lost a reply: the test did not provoke the slow consumer")
	}
	inc := w.Incidents()
	if inc.SlowConsumer+inc.Dropped == 0 || inc.Transient < int64(failed) {
		t.Errorf("incidents %+v after %d failed reads: not counted", inc, failed)
	}
	if err := w.replies.sub.SetPendingLimits(-1, replyPending); err != nil {
		t.Fatal(err)
	}
	evs, err := w.Load(ctx, "r") // late slow-consumer reports may still come: they must not fail it
	if err != nil || len(evs) != 201 {
		t.Fatalf("read after the drops: %d events, %v; want 201", len(evs), err)
	}
}

// floodReplies sends 8 messages to the reply subscription, for no read,
// and waits until the client has taken them in (or dropped them).
func floodReplies(t *testing.T, w *World) {
	t.Helper()
	for range 8 {
		if err := w.nc.Publish(w.replies.prefix+"nobody", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestLateSlowConsumerReportSparesLaterReads: nats.go reports a slow
// consumer on its own goroutine, possibly long after the drop. The report
// fails the reads that were in flight when replies were dropped, and not
// a read that began after: that read lost nothing, and failing it would
// hand a transient error to a caller (a test's final check, a report's
// last read) on a connection that is healthy again.
func TestLateSlowConsumerReportSparesLaterReads(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	appendSteps(t, w, "r", 3)
	x := w.replies
	before, err := x.start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer x.finish(before)
	if err := x.sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	release := stallMux(w)
	floodReplies(t, w)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if d, _ := x.sub.Dropped(); d > 0 {
			break
		}
		if time.Now().After(deadline) {
			release()
			t.Fatal("the subscription dropped nothing: the test did not provoke the slow consumer")
		}
	}
	release()
	if err := x.sub.SetPendingLimits(-1, replyPending); err != nil {
		t.Fatal(err)
	}
	after, err := x.start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer x.finish(after)

	w.asyncError(w.nc, x.sub, nats.ErrSlowConsumer) // the report, arriving late
	select {
	case <-before.done:
		if !errors.Is(before.err, ErrDropped) {
			t.Errorf("the read in flight during the drop ended with %v; want ErrDropped", before.err)
		}
	default:
		t.Error("the read in flight during the drop was not failed by the report")
	}
	select {
	case <-after.done:
		t.Fatalf("a read begun after the drop was failed by the late report: %v", after.err)
	default:
	}
	evs, err := w.Load(ctx, "r")
	if err != nil || len(evs) != 4 {
		t.Fatalf("read after the report: %d events, %v; want 4", len(evs), err)
	}
}

// TestUnreportedDropFailsTheRead: nats.go reports only the first drop of
// a run of drops, so a read that lost its replies later in the run is told
// by nobody. Here nobody reports any drop (the connection's error handler
// is taken away); the two reads in flight must still fail with ErrDropped
// within a fraction of a second, not wait out the idle timeout, and the
// dropped replies are counted once each among the incidents, not once per
// read they failed.
func TestUnreportedDropFailsTheRead(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	x := w.replies
	var reports atomic.Int64
	w.nc.SetErrorHandler(func(*nats.Conn, *nats.Subscription, error) { reports.Add(1) })
	defer w.nc.SetErrorHandler(w.asyncError)
	if err := x.sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	var calls [2]*readCall
	for i := range calls {
		c, err := x.start(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer x.finish(c)
		calls[i] = c
	}
	release := stallMux(w)
	floodReplies(t, w)
	release()
	began := time.Now()
	for _, c := range calls {
		_, err := x.wait(ctx, c, 2*time.Second)
		if took := time.Since(began); !errors.Is(err, ErrDropped) || took > time.Second {
			t.Fatalf("a read whose replies were dropped unreported ended after %s with %v; want ErrDropped at once", took.Round(time.Millisecond), err)
		}
	}
	if reports.Load() == 0 {
		t.Fatal("nats.go reported no slow consumer: the test did not provoke one")
	}
	d, _ := x.sub.Dropped()
	if got := w.Incidents().Dropped; got != int64(d) {
		t.Errorf("incidents count %d dropped replies; the client dropped %d", got, d)
	}
}

// TestGapNeverReturned: a run's log with a message missing in the middle
// (deleted from the stream by hand) is refused by every read — Load, and
// the cache's catch-up behind Append — with a transient ErrGap, never
// returned shorter.
func TestGapNeverReturned(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	appendSteps(t, w, "r", 10)
	s, err := w.js.Stream(ctx, w.logStream)
	if err != nil {
		t.Fatal(err)
	}
	subj := w.subjLog + token("r")
	var seqs []uint64
	for seq := uint64(1); len(seqs) < 11; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject == subj {
			seqs = append(seqs, seq)
		}
	}
	if err := s.DeleteMsg(ctx, seqs[4]); err != nil {
		t.Fatal(err)
	}
	evs, err := w.Load(ctx, "r")
	if err == nil || !errors.Is(err, ErrGap) || !world.IsTransient(err) {
		t.Fatalf("Load of a log with a hole = %d events, %v; want a transient ErrGap", len(evs), err)
	}
	rs := w.run("r")
	rs.mu.Lock()
	rs.reset()
	rs.mu.Unlock()
	_, err = w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "x"}, world.Precondition{})
	if err == nil || !errors.Is(err, ErrGap) {
		t.Fatalf("Append over a cache rebuilt from a log with a hole: %v; want ErrGap", err)
	}
	if w.Incidents().Gaps < 2 {
		t.Errorf("incidents %+v: want the two refused reads counted as gaps", w.Incidents())
	}
}

// TestEngineRetriesDroppedReads: two 32-branch baseline fan-out (every
// completer loads the whole log) while the reply subscription keeps
// dropping: its pending limit is 16 messages and its handler is held up
// for 3 ms in every 8. Reads fail with ErrDropped, the engine retries them,
// and both runs complete with each step completed exactly once.
func TestEngineRetriesDroppedReads(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{VisibilityTimeout: 5 * time.Second})
	v, err := engine.LookupVersion("baseline")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{World: w, Features: v.Features})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(ctx) }()
	if err := w.replies.sub.SetPendingLimits(16, -1); err != nil {
		t.Fatal(err)
	}
	stop := stallPeriodically(w)
	const runs, branches = 2, 32
	for i := range runs {
		if err := e.StartRun(ctx, fmt.Sprint("run", i), engine.FanOut(branches)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := range runs {
		id := fmt.Sprint("run", i)
		for {
			r, err := w.GetRun(ctx, id)
			if err == nil && r.Status == world.StatusCompleted {
				break
			}
			if time.Now().After(deadline) {
				stop()
				t.Fatalf("run %s did not complete within 60 s (status %v, %v); incidents %+v", id, r.Status, err, w.Incidents())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop()
	if err := w.replies.sub.SetPendingLimits(-1, replyPending); err != nil {
		t.Fatal(err)
	}
	inc := w.Incidents()
	if inc.Dropped+inc.SlowConsumer == 0 {
		t.Fatalf("incidents %+v: no reply was dropped, the test proved nothing", inc)
	}
	for i := range runs {
		id := fmt.Sprint("run", i)
		evs, err := w.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		completed := map[string]int{}
		for _, ev := range evs {
			if ev.Kind == world.StepCompleted {
				completed[ev.Entity]++
			}
		}
		if len(completed) != branches {
			t.Errorf("%s: %d steps completed, want %d", id, len(completed), branches)
		}
		for step, n := range completed {
			if n != 1 {
				t.Errorf("%s: step %s completed %d times", id, step, n)
			}
		}
	}
	t.Logf("incidents: %s", inc)
}
