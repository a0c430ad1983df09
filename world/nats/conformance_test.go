package natsworld_test

import (
	"context"
	"testing"

	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/worldtest"
)

// embeddedFactory runs each subtest on a fresh embedded world.
func embeddedFactory(storage string) worldtest.Factory {
	return func(t *testing.T, opts world.Options) worldtest.Harness {
		t.Helper()
		w, err := natsworld.New(context.Background(), natsworld.Config{Options: opts, Storage: storage})
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
}

func TestConformanceEmbedded(t *testing.T) {
	worldtest.Run(t, embeddedFactory(natsworld.StorageFile))
}

func TestConformanceEmbeddedMemory(t *testing.T) {
	worldtest.Run(t, embeddedFactory(natsworld.StorageMemory))
}
