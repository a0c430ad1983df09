package natsworld

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

func newEmbedded(t *testing.T, opts world.Options) *World {
	t.Helper()
	w, err := New(context.Background(), Config{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// landBehindCache stores ev on run's subject with its message id, bypassing
// the world's cache: what an earlier attempt whose ack was lost (or another
// process) leaves behind.
func landBehindCache(t *testing.T, w *World, run string, ev world.Event, status world.RunStatus) {
	t.Helper()
	msg := nats.NewMsg(w.subjLog + token(run))
	stored, _, err := w.readSubject(context.Background(), w.logStream, msg.Subject, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	msg.Data = encodeEvent(ev, int64(len(stored))+1, status, runMeta{})
	msg.Header.Set(jetstream.MsgIDHeader, token(run)+"/"+ev.ID)
	if _, err := w.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// TestRetriedGuardedAppend: an append whose first attempt landed but whose
// ack was lost is retried with the same ID and the same (now stale) guard.
// The server answers "wrong last sequence" (single server) or "duplicate"
// (R3); either way the world reads the log and reports the first attempt's
// position as a duplicate, not a precondition failure.
func TestRetriedGuardedAppend(t *testing.T) {
	t.Run("Pipelined", func(t *testing.T) { testRetriedGuardedAppend(t, false) })
	t.Run("Serial", func(t *testing.T) { testRetriedGuardedAppend(t, true) })
}

func testRetriedGuardedAppend(t *testing.T, serial bool) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{Guard: true})
	if serial {
		w.shared, w.seq = true, nil // as on an external server
	}
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	ev := world.Event{Kind: world.RunStarted, ID: "start"}
	landBehindCache(t, w, "r", ev, world.StatusRunning)

	res, err := w.Append(ctx, "r", ev, world.Precondition{Guarded: true, LastPos: 1})
	if err != nil {
		t.Fatalf("retried guarded append: %v", err)
	}
	if !res.Duplicate || res.Pos != 2 {
		t.Fatalf("retried guarded append = %+v, want Duplicate at 2", res)
	}
	// The cache caught up: the next append lands at 3 with a fresh guard,
	// and a stale guard is refused.
	_, err = w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{Guarded: true, LastPos: 1})
	if !errors.Is(err, world.ErrPrecondition) {
		t.Fatalf("stale guard: error %v, want ErrPrecondition", err)
	}
	res, err = w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{Guarded: true, LastPos: 2})
	if err != nil || res.Pos != 3 || res.Pending != 1 {
		t.Fatalf("fresh guard = %+v, %v; want Pos 3, Pending 1", res, err)
	}
}

// TestCacheCatchUp: an event stored behind the cache by another writer is
// read before a rule violation is reported, and folded into the rules.
func TestCacheCatchUp(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	w.shared, w.seq = true, nil // as on an external server
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	landBehindCache(t, w, "r", world.Event{Kind: world.StepCreated, ID: "c-s", Entity: "s"}, world.StatusPending)
	res, err := w.Append(ctx, "r", world.Event{Kind: world.StepStarted, Entity: "s"}, world.Precondition{})
	if err != nil || res.Pos != 3 || res.Pending != 1 {
		t.Fatalf("step_started after a step_created behind the cache = %+v, %v; want Pos 3, Pending 1", res, err)
	}
	evs, err := w.Load(ctx, "r")
	if err != nil || len(evs) != 3 {
		t.Fatalf("Load = %d events, %v; want 3", len(evs), err)
	}
}

func TestToken(t *testing.T) {
	for _, id := range []string{"run-1", "a.b", "a b", "*", ">", "", "ü", "=x"} {
		tok := token(id)
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=') {
				t.Errorf("token(%q) = %q: %q is not a safe subject character", id, tok, c)
			}
		}
	}
	if token("a.b") == token("a_b") || token("=x") == token("x") {
		t.Error("tokens collide")
	}
}

func TestEventEncoding(t *testing.T) {
	in := world.Event{Kind: world.RunCreated, ID: "i", Entity: "e", Data: []byte("payload")}
	ev, status, meta, err := decodeEvent(encodeEvent(in, 7, world.StatusPending, runMeta{Deployment: "d", SpecVersion: 3}))
	if err != nil || ev.Kind != in.Kind || ev.Pos != 7 || ev.ID != "i" || ev.Entity != "e" || string(ev.Data) != "payload" ||
		status != world.StatusPending || meta.Deployment != "d" || meta.SpecVersion != 3 {
		t.Fatalf("round trip = %+v %v %+v %v", ev, status, meta, err)
	}
	if _, _, _, err := decodeEvent([]byte{9}); err == nil {
		t.Fatal("decoded garbage")
	}
}

// TestPipelineChainBreaks: concurrent appends to a few runs while other
// messages to the log stream are rejected by the server (so the sequencer's
// predictions overcount and chains break) and every append is repeated
// with its ID. Every append must land exactly once, positions must match
// the stored log, and pending counts must be exact.
func TestPipelineChainBreaks(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	if !w.pipelined() {
		t.Fatal("embedded world is not pipelined")
	}
	const runs, steps = 3, 60
	for r := range runs {
		if err := w.CreateRun(ctx, world.Run{ID: fmt.Sprint("r", r)}); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		run string
		ev  world.Event
		res world.AppendResult
		err error
	}
	results := make(chan result, runs*steps*2)
	var wg sync.WaitGroup
	for r := range runs {
		run := fmt.Sprint("r", r)
		for s := range steps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev := world.Event{Kind: world.StepCreated, ID: fmt.Sprint("c", s), Entity: fmt.Sprint("s", s)}
				res, err := w.Append(ctx, run, ev, world.Precondition{})
				results <- result{run, ev, res, err}
				// The same append again: a duplicate at the same position.
				again, err := w.Append(ctx, run, ev, world.Precondition{})
				if err == nil && (!again.Duplicate || again.Pos != res.Pos) {
					err = fmt.Errorf("retry of %s = %+v, first %+v", ev.ID, again, res)
				}
				results <- result{run, ev, again, err}
			}()
		}
	}
	// Rejected writes through the sequencer: they take no sequence.
	for i := range 20 {
		m := nats.NewMsg(w.subjLog + "rejected")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "999999")
		if _, err := w.logPublish(ctx, m); !isWrongLastSeq(err) {
			t.Fatalf("rejected write %d: %v", i, err)
		}
	}
	wg.Wait()
	close(results)
	if !w.pipelined() {
		t.Error("pipelining turned off without another writer")
	}
	pos := map[string]map[int64]string{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("append %s to %s: %v", r.ev.ID, r.run, r.err)
		}
		if r.res.Duplicate {
			continue
		}
		if pos[r.run] == nil {
			pos[r.run] = map[int64]string{}
		}
		if prev, ok := pos[r.run][r.res.Pos]; ok {
			t.Fatalf("%s: position %d given to %s and %s", r.run, r.res.Pos, prev, r.ev.ID)
		}
		pos[r.run][r.res.Pos] = r.ev.ID
	}
	for r := range runs {
		run := fmt.Sprint("r", r)
		evs, err := w.Load(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != steps+1 {
			t.Fatalf("%s has %d events, want %d", run, len(evs), steps+1)
		}
		for _, ev := range evs[1:] {
			if pos[run][ev.Pos] != ev.ID {
				t.Fatalf("%s: stored event at %d is %s, its append reported %s", run, ev.Pos, ev.ID, pos[run][ev.Pos])
			}
		}
		res, err := w.Append(ctx, run, world.Event{Kind: world.StepStarted, Entity: "s0"}, world.Precondition{})
		if err != nil || res.Pending != steps || res.Pos != steps+2 {
			t.Fatalf("%s: step_started = %+v, %v; want Pos %d, Pending %d", run, res, err, steps+2, steps)
		}
	}
}

// TestPipelineForeignWriter: a message stored behind the sequencer's back
// (another writer) turns pipelining off; appends stay correct.
func TestPipelineForeignWriter(t *testing.T) {
	ctx := context.Background()
	w := newEmbedded(t, world.Options{})
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.js.Publish(ctx, w.subjLog+"foreign", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: fmt.Sprint(i)}, world.Precondition{})
		if err != nil || res.Pos != int64(i+2) {
			t.Fatalf("append %d = %+v, %v", i, res, err)
		}
	}
	if w.pipelined() {
		t.Error("still pipelined after a foreign write")
	}
}
