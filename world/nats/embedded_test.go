package natsworld

import (
	"context"
	"os"
	"testing"

	"github.com/durabench/durabench/world"
)

// TestSharedEmbedded: two worlds on one shared embedded server (an
// interleaved pair's) keep apart under their prefixes, closing them leaves
// the server up, and closing the server removes its store.
func TestSharedEmbedded(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var worlds []*World
	for _, p := range []string{"pair_a", "pair_b"} {
		w, err := New(ctx, Config{Prefix: p, Embedded: e, SoleWriter: true})
		if err != nil {
			t.Fatal(err)
		}
		worlds = append(worlds, w)
	}
	if err := worlds[0].CreateRun(ctx, world.Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := worlds[1].GetRun(ctx, "r1"); err == nil {
		t.Error("world b sees world a's run")
	}
	if err := worlds[1].CreateRun(ctx, world.Run{ID: "r1"}); err != nil {
		t.Errorf("world b cannot create its own r1: %v", err)
	}
	if err := worlds[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := worlds[1].GetRun(ctx, "r1"); err != nil {
		t.Errorf("world b after a closed: %v", err)
	}
	if err := worlds[1].Close(); err != nil {
		t.Fatal(err)
	}
	dir := e.store.dir
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the shared store went with its worlds: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("store %s left after Close: %v", dir, err)
	}
}
