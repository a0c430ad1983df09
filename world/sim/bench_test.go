package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/durabench/durabench/world/sim"
)

// BenchmarkSwitch measures one scheduling point: a task parks and another
// resumes (two tasks sleeping in turn).
func BenchmarkSwitch(b *testing.B) {
	w := sim.New(sim.Config{})
	defer w.Close()
	rt := w.Runtime()
	n := b.N
	b.ResetTimer()
	err := w.Run(context.Background(), func(ctx context.Context) {
		g := rt.NewGroup()
		for range 2 {
			g.Go(func() error {
				for range n / 2 {
					_ = rt.Sleep(ctx, time.Millisecond)
				}
				return nil
			})
		}
		_ = g.Wait()
	})
	if err != nil {
		b.Fatal(err)
	}
}
