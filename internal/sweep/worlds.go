package sweep

import (
	"context"
	"encoding/json"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/registry"
)

// The worlds' own settings are fields of the plan like any other: flag
// --<world>-<setting> (or the setting's Flag), sweep-file key
// <world>.<setting>; they live in Plan.WorldSettings.
func init() {
	for _, k := range registry.All() {
		for _, s := range k.Settings {
			flag, key := k.FlagName(s), k.Name+"."+s.Name
			set := func(p *Plan, v []string) error {
				if p.WorldSettings == nil {
					p.WorldSettings = map[string]registry.Values{}
				}
				if p.WorldSettings[k.Name] == nil {
					p.WorldSettings[k.Name] = k.Defaults()
				}
				return k.Set(p.WorldSettings[k.Name], s.Name, v[0])
			}
			fields = append(fields, field{flag, false, s.Help, set})
			fileKeys[key] = flag
			for _, name := range append([]string{flag}, s.Aliases...) {
				if name != flag {
					fields = append(fields, field{name, false, "the same as --" + flag, set})
				}
				worldFlags[name] = s
				switch s.Type {
				case registry.Int:
					fieldKinds[name] = kInt
				case registry.Bool:
					fieldKinds[name] = kBool
				}
			}
		}
	}
}

// worldFlags are the fields that are a world's setting, by flag name.
var worldFlags = map[string]registry.Setting{}

// worldDefaults are every world's settings at their defaults.
func worldDefaults() map[string]registry.Values {
	out := map[string]registry.Values{}
	for _, k := range registry.All() {
		out[k.Name] = k.Defaults()
	}
	return out
}

func worldNames() []string {
	var n []string
	for _, k := range registry.All() {
		n = append(n, k.Name)
	}
	return n
}

// cellWorld is the world a cell runs on, and how to drive it: real-time
// worlds run the driver directly, virtual-time worlds (sim) run it as their
// root task.
type cellWorld struct {
	world.World
	// run runs fn on the world (in virtual time on sim).
	run   func(ctx context.Context, fn func(ctx context.Context)) error
	close func() error
}

// newWorld builds a fresh world for one cell — its own store (mem, sim), or
// its own resources under the cell's prefix on a server (nats) — wrapped by
// the cell's latency/fault profile.
func (r *sweepRun) newWorld(ctx context.Context, c CellPlan) (*cellWorld, error) {
	base, err := c.World.New(ctx, registry.Config{Options: c.WorldOptions, Settings: c.WorldSettings,
		Prefix: r.cellPrefix(c),
		// The prefix is this sweep's own: only external workers write
		// there besides this process.
		SoleWriter: !r.plan.External.Enabled(),
		Profiled:   c.ProfileName != "none",
		Shared:     c.shared})
	if err != nil {
		return nil, err
	}
	cw := &cellWorld{run: func(ctx context.Context, fn func(ctx context.Context)) error { fn(ctx); return nil }}
	if r, ok := base.(registry.Runner); ok {
		cw.run = r.Run
	}
	cw.World = profile.Wrap(base, c.Profile, c.Seed)
	if c.wrap != nil {
		cw.World = c.wrap(cw.World)
	}
	cw.close = cw.World.Close
	return cw, nil
}

// cellPrefix names the cell's resources on a shared server in the running
// sweep (nats: "<prefix>_log", "_queue", "_chunks").
func (r *sweepRun) cellPrefix(c CellPlan) string { return r.sweepPrefix() + c.Hash }

// sweepPrefix begins the names of every cell's resources in the running
// sweep.
func (r *sweepRun) sweepPrefix() string { return "durabench_" + r.id + "_" }

// Probe checks, before anything runs, that the services the plan's worlds
// use answer (an external NATS server). The error names the setting.
func (p *Plan) Probe(ctx context.Context) error {
	for _, t := range p.foreignTargets() {
		if t.URL != "" {
			continue
		}
		if _, err := target.Find(t.Name); err != nil {
			return p.errAt("targets", err)
		}
	}
	for _, name := range p.Worlds {
		k, err := registry.Lookup(name)
		if err != nil {
			return p.errAt("world", err)
		}
		if k.Probe == nil {
			continue
		}
		if err := k.Probe(ctx, p.WorldSettings[name]); err != nil {
			return &UsageError{Err: err}
		}
	}
	return nil
}

// recordWorldSettings sets, in o, the settings of the plan's worlds that
// results record: world_options.<world>_<setting> in the results file.
func (p *Plan) recordWorldSettings(o *results.WorldOptions) {
	rec := map[string]any{}
	for _, name := range p.Worlds {
		k, err := registry.Lookup(name)
		if err != nil {
			continue
		}
		vals := p.WorldSettings[name]
		for _, s := range k.Settings {
			if !s.Record {
				continue
			}
			v := vals[s.Name]
			if s.Redact != nil {
				v = s.Redact(v)
			}
			key := k.Name + "_" + s.Name
			switch s.Type {
			case registry.Int:
				rec[key] = vals.Int(s.Name)
			case registry.Bool:
				rec[key] = vals.Bool(s.Name)
			default:
				rec[key] = v
			}
		}
	}
	// The schema's fields carry the JSON names: a setting lands in its own.
	b, _ := json.Marshal(rec)
	_ = json.Unmarshal(b, o)
}
