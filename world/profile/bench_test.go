package profile_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
)

// BenchmarkOverhead measures what the decorator costs per call on the mem
// world: bare (no decorator), none (Wrap returns the world itself) and
// fixed0 (every op has a fixed 0 latency, so every call goes through the
// decorator's path without sleeping). Compare ns/op across the three.
func BenchmarkOverhead(b *testing.B) {
	fixed0, err := profile.Parse("fixed0.yaml", []byte("ops: {default: {latency: 0}}"))
	if err != nil {
		b.Fatal(err)
	}
	none, _ := profile.Load("none")
	wraps := []struct {
		name string
		wrap func(world.World) world.World
	}{
		{"bare", func(w world.World) world.World { return w }},
		{"none", func(w world.World) world.World { return profile.Wrap(w, none, 1) }},
		{"fixed0", func(w world.World) world.World { return profile.Wrap(w, fixed0, 1) }},
	}
	ops := []struct {
		name string
		fn   func(ctx context.Context, w world.World, i int) error
	}{
		{"GetRun", func(ctx context.Context, w world.World, i int) error { _, err := w.GetRun(ctx, "r"); return err }},
		// A repeated step_created with its idempotency ID: the inner cost
		// stays constant instead of growing with the log.
		{"Append", func(ctx context.Context, w world.World, i int) error {
			_, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s", ID: "s"}, world.Precondition{})
			return err
		}},
		{"Load", func(ctx context.Context, w world.World, i int) error { _, err := w.Load(ctx, "small"); return err }},
		{"Publish", func(ctx context.Context, w world.World, i int) error {
			_, err := w.Publish(ctx, world.Message{ID: fmt.Sprint(i)}, world.PublishOptions{})
			return err
		}},
	}
	for _, op := range ops {
		for _, wr := range wraps {
			b.Run(op.name+"/"+wr.name, func(b *testing.B) {
				ctx := context.Background()
				m := mem.New(world.Options{})
				defer m.Close()
				m.CreateRun(ctx, world.Run{ID: "r"})
				m.CreateRun(ctx, world.Run{ID: "small"})
				w := wr.wrap(m)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := op.fn(ctx, w, i); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
