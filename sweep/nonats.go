//go:build !durabench_nats

package sweep

// TODO(wiring): world/nats is mid-edit; this file goes when it compiles and
// nats.go loses its build tag.

import (
	"context"
	"fmt"

	"github.com/durabench/durabench/world"
)

func (p *Plan) newNATS(ctx context.Context, opts world.Options, prefix string) (world.World, error) {
	return nil, fmt.Errorf("the nats world is not built yet: %w", ErrInvalid)
}

// Probe checks that the plan's external services answer.
func (p *Plan) Probe(ctx context.Context) error { return nil }

const natsAvailable = false
