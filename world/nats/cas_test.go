package natsworld

import (
	"context"
	"errors"
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
	msg.Data = encodeEvent(ev, status, runMeta{})
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
	ctx := context.Background()
	w := newEmbedded(t, world.Options{Guard: true})
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
	w.shared = true // as on an external server
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
	ev, status, meta, err := decodeEvent(encodeEvent(in, world.StatusPending, runMeta{Deployment: "d", SpecVersion: 3}))
	if err != nil || ev.Kind != in.Kind || ev.ID != "i" || ev.Entity != "e" || string(ev.Data) != "payload" ||
		status != world.StatusPending || meta.Deployment != "d" || meta.SpecVersion != 3 {
		t.Fatalf("round trip = %+v %v %+v %v", ev, status, meta, err)
	}
	if _, _, _, err := decodeEvent([]byte{9}); err == nil {
		t.Fatal("decoded garbage")
	}
}
