package rawjs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/internal/bench/rawjs"
	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

// BenchmarkFanOutNATS runs one fan-out per iteration on the embedded NATS
// world for every version and width, and in the same iteration the floor:
// the same operations as raw JetStream calls (guarded publishes, batched
// direct gets, work-queue publish-to-consume) on an embedded server of the
// same configuration, at the same concurrency (internal/bench/fanout.Floor on
// rawjs.World). Target: within 2x at 256 branches. The floor also runs on
// the NATS world itself, which splits the ratio into the engine's share
// (engine/world-floor) and the NATS world's (world-floor/floor).
func BenchmarkFanOutNATS(b *testing.B) {
	newNATS := func() (world.World, error) { return natsworld.New(context.Background(), natsworld.Config{}) }
	newRaw := func() (world.World, error) { return rawjs.New(context.Background(), 0) }
	for _, v := range engine.Versions() {
		for _, n := range []int{1, 20, 256} {
			b.Run(fmt.Sprintf("%s/branches=%d", v.Name, n), func(b *testing.B) {
				// One warm-up run: a 256-branch run on NATS takes a second.
				fanout.Bench(b, v.Features, n, newNATS, newRaw, fanout.Options{Warmup: 1, WorldFloor: true})
			})
		}
	}
}

// TestFloorRunsOnRawJetStream runs the floor of a 20-branch fan-out of
// every version on the raw JetStream world.
func TestFloorRunsOnRawJetStream(t *testing.T) {
	ctx := context.Background()
	w, err := rawjs.New(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, v := range engine.Versions() {
		fl := fanout.NewFloor(w, v.Features, 20, 64)
		if err := fl.Start(ctx, fanout.Concurrency); err != nil {
			t.Fatal(err)
		}
		if _, err := fl.Run(ctx, fmt.Sprintf("r%d", i), fanout.RunTimeout); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := fl.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
