package registry

import (
	"context"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

func init() {
	Register(&Kind{
		Name:        "mem",
		Description: "in-process maps and channels: the floor for engine overhead",
		// Measured (BenchmarkCellHeap): 4.4–9.4 KB per branch, the peak
		// heap's noise included; 5.1 KB per step of a 2,000-step chain.
		StepBytes: 12 << 10,
		New: func(_ context.Context, c Config) (world.World, error) {
			return mem.New(c.Options), nil
		},
	})
}
