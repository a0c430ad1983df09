package pgworld_test

import (
	"context"
	"testing"

	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
	"github.com/durabench/durabench/world/worldtest"
)

// factory runs each subtest on a fresh world: its own schema on the
// package's server, dropped by Close.
func factory(t *testing.T, opts world.Options) worldtest.Harness {
	t.Helper()
	w, err := pgworld.New(context.Background(), pgworld.Config{Options: opts, URL: needServer(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return worldtest.Harness{World: w, Run: worldtest.Direct}
}

func TestConformance(t *testing.T) {
	needServer(t)
	worldtest.Run(t, factory)
}
