package simcheck

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/sim"
)

// cloudish is a fixed 25 ms round trip per world call.
func cloudish(world.Op, *rand.Rand) time.Duration { return 25 * time.Millisecond }

// BenchmarkFanOut256 simulates one 256-branch fan-out run per iteration, on
// a fresh sim world with 25 ms world calls, for every built-in version. The
// runs/s metric is simulated runs per wall-clock second.
func BenchmarkFanOut256(b *testing.B) {
	for _, v := range engine.Versions() {
		b.Run(v.Name, func(b *testing.B) {
			b.ReportAllocs()
			var virtual time.Duration
			for i := 0; b.Loop(); i++ {
				w := sim.New(sim.Config{Seed: int64(i + 1), Latency: cloudish})
				obs := newObserver(w.Runtime())
				eng, err := engine.New(engine.Config{World: w, Features: v.Features, Observer: obs})
				if err != nil {
					b.Fatal(err)
				}
				err = w.Run(context.Background(), func(ctx context.Context) {
					if err := eng.Start(ctx); err != nil {
						b.Error(err)
						return
					}
					if err := eng.StartRun(ctx, runID, engine.FanOut(256)); err != nil {
						b.Error(err)
						return
					}
					if !obs.done.Wait(ctx, time.Hour) {
						b.Error("run did not finish")
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				virtual += obs.at
				w.Close()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric(float64(virtual.Milliseconds())/float64(b.N), "virtual-ms/run")
		})
	}
}
