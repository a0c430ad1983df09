package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

// TestEveryVersionOnEmbeddedNATS: fan-outs of 20, 64 and 256 branches of
// every version, with and without the kill switch, complete on the default
// world — embedded NATS JetStream — with each step body run exactly once and
// each completion recorded exactly once.
func TestEveryVersionOnEmbeddedNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded NATS: not in -short")
	}
	ctx := context.Background()
	for _, v := range engine.Versions() {
		for _, sw := range []string{"none", "resilient-step-dispatch=0"} {
			t.Run(v.Name+"/"+sw, func(t *testing.T) {
				set, err := engine.ParseSwitchSet(sw)
				if err != nil {
					t.Fatal(err)
				}
				w, err := natsworld.New(ctx, natsworld.Config{Options: world.Options{}, Storage: natsworld.StorageMemory})
				if err != nil {
					t.Fatal(err)
				}
				h := start(t, w, set.Apply(v.Features))
				for _, n := range []int{20, 64, 256} {
					id := fmt.Sprintf("fanout%d", n)
					p := engine.FanOut(n)
					h.run(t, id, p)
					h.checkExactlyOnce(t, id, p)
				}
			})
		}
	}
}
