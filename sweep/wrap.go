package sweep

import (
	"fmt"

	"github.com/durabench/durabench/world"
)

// wrapProfile wraps w in the cell's latency/fault profile.
// TODO(wiring): profile.Wrap lands with world/profile; until then only the
// "none" profile without faults runs, so no figure is ever mislabelled.
func (p *Plan) wrapProfile(w world.World, c Cell) (world.World, error) {
	prof, err := p.loadProfile(c.Profile)
	if err != nil {
		return nil, err
	}
	if prof.Name == "none" && p.Faults == "" {
		return w, nil
	}
	return nil, fmt.Errorf("profile %s: latency/fault profiles are not wired yet", c.Profile)
}
