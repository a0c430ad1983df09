package sweep

import (
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// wrapProfile wraps w in the cell's latency/fault profile (with the plan's
// fault overrides), seeded by the cell's seed.
func (p *Plan) wrapProfile(w world.World, c CellPlan) (world.World, error) {
	prof, err := p.loadProfile(c.Profile)
	if err != nil {
		return nil, err
	}
	return profile.Wrap(w, prof, c.Seed), nil
}
