package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// fanOutBranches are the fan-out widths benchmarked (DESIGN.md's sweep).
var fanOutBranches = []int{1, 20, 256}

// BenchmarkFanOutMem runs one fan-out per iteration on the mem world for
// every version and width, and in the same iteration the floor: the same
// world operations issued directly with no engine (internal/bench/fanout.Floor), on
// its own fresh mem world. It reports TTLS p50 of the engine and of the
// floor and their ratio (target: within 3x at 256 branches).
func BenchmarkFanOutMem(b *testing.B) {
	newMem := func() (world.World, error) { return mem.New(world.Options{}), nil }
	for _, v := range engine.Versions() {
		for _, n := range fanOutBranches {
			b.Run(fmt.Sprintf("%s/branches=%d", v.Name, n), func(b *testing.B) {
				fanout.Bench(b, v.Features, n, newMem, newMem, fanout.Options{})
			})
		}
	}
}

// BenchmarkEngineMem256 runs only the engine, one 256-branch fan-out per
// iteration, for every version: the figure to profile (go test
// -cpuprofile) and to compare before and after an engine optimization.
// Its allocations include the mem world's, which do not change as long as
// the engine issues the same world operations; cpu-us/op is the process's
// CPU time per run, steadier than wall time on a shared machine.
func BenchmarkEngineMem256(b *testing.B) { benchEngineMem(b, 256) }

// BenchmarkEngineMem1 is BenchmarkEngineMem256 for a one-branch run: the
// engine's fixed cost per run.
func BenchmarkEngineMem1(b *testing.B) { benchEngineMem(b, 1) }

func benchEngineMem(b *testing.B, branches int) {
	for _, v := range engine.Versions() {
		b.Run(v.Name, func(b *testing.B) {
			ctx := context.Background()
			w := mem.New(world.Options{})
			defer w.Close()
			eng, err := fanout.NewEngine(ctx, w, v.Features)
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Stop(ctx)
			p := engine.FanOut(branches)
			for i := range fanout.WarmupRuns {
				if _, err := eng.Run(ctx, "w"+strconv.Itoa(i), p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, err := eng.Run(ctx, "r"+strconv.Itoa(i), p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(fanout.Micros(processCPU()-cpu0)/float64(b.N), "cpu-us/op")
		})
	}
}
