package sweep

import (
	"context"
	"crypto/sha256"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// Measure runs one cell of the plan in this process and returns what it
// measured, writing nothing: the path a sweep takes for the cell (the same
// world, seed, run ids and stall rule, so the figures are the ones `durabench
// sweep` prints for it) without the journal, the results file, the report or
// progress. c is one of the plan's cells (Cells), or one WithProfile made
// of it. wrap, when set, wraps the cell's world outside its profile, e.g. to
// time the calls the engine makes; it must pass every call through and
// change nothing in the schedule. Plans whose engine runs on external
// workers are refused.
func (p *Plan) Measure(ctx context.Context, c CellPlan, wrap func(world.World) world.World) (results.Cell, error) {
	if p.resolved == nil {
		if err := p.Validate(); err != nil {
			return results.Cell{}, err
		}
	}
	if p.External.Enabled() {
		return results.Cell{}, &UsageError{Msg: "a cell is measured in this process, not on external workers"}
	}
	c.wrap = wrap
	r := &sweepRun{plan: p, prog: NoProgress{}}
	rc, res, err := r.runCell(ctx, c)
	if err != nil {
		return results.Cell{}, err
	}
	if res.Interrupted {
		return results.Cell{}, ErrInterrupted
	}
	return rc, nil
}

// WithProfile returns the cell with profile prof named name: its key, hash
// (its run ids) and seed are those the same cell has in a plan that names
// the profile so. Calibration measures candidate profiles this way, as the
// profile they will be written as, so that a sweep of the written profile
// replays the figures it was fitted to.
func (c CellPlan) WithProfile(name string, prof *profile.Profile) CellPlan {
	planSeed := c.Seed ^ keyBits(sha256.Sum256([]byte(c.Key)))
	c.ProfileName, c.Profile, c.ProfileFiles = name, prof, nil
	c.Key = cellKey(c.Scenario.Name, c.Options, c.Version.Name, c.Switches.String(), c.World.Name, name)
	c.Hash, c.Seed = keyDigest(c.Key, planSeed)
	c.Identity = c.identity()
	return c
}
