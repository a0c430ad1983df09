package worlds

import (
	"context"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

func init() {
	Register(&Kind{
		Name:        "mem",
		Description: "in-process maps and channels: the floor for engine overhead",
		New: func(_ context.Context, c Config) (world.World, error) {
			return mem.New(c.Options), nil
		},
	})
}
