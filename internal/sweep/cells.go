package sweep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/registry"
)

// CellPlan is one cell of the plan: a point of the matrix, resolved and
// ready to run (results.Cell is what running it measured). Its fields are
// values; running it looks nothing up.
type CellPlan struct {
	// Target is the engine under test when it is not the built-in one
	// (nil: the reference engine, in-process on World). A target cell has
	// no version, switches or profile of durabench's, and World only gives
	// the driver its clock.
	Target   *TargetSpec
	Scenario *scenarios.Scenario
	// Options are the scenario's complete option values (defaults filled
	// in, canonical spelling).
	Options  scenarios.Values
	Program  engine.Program
	Version  engine.Version
	Switches engine.SwitchSet
	// Features are the version's features with the switch set applied.
	Features engine.Features
	// World is the kind of world the cell runs on, WorldSettings its
	// settings, WorldOptions the options it is built with: the plan's, the
	// guard settled by the switch set, the cell's seed.
	World         *registry.Kind
	WorldSettings registry.Values
	WorldOptions  world.Options
	// ProfileName is the latency/fault profile as the plan names it (a
	// name or a file): results record it. Profile is that profile read
	// once for the plan with the fault overrides applied; ProfileFiles are
	// the files it was read from, which external workers get a copy of.
	ProfileName  string
	Profile      *profile.Profile
	ProfileFiles map[string][]byte
	// Pacer starts the cell's runs.
	Pacer driver.Pacer
	// Key identifies the cell: equal keys are the same measurement.
	Key string
	// Hash is a short digest of Key: run ids and NATS prefixes start with it.
	Hash string
	// Seed is the plan seed mixed with the key, so a cell's randomness does
	// not depend on the cells before it (a resumed sweep reproduces it).
	Seed int64
	// Identity is the cell's key fields as results record them; Metrics how
	// its timelines become metrics (the plan's stall rule, the stream's
	// pacing); CadenceSHA256 names a replayed cadence. Resolved once, with
	// the rest.
	Identity      results.Cell
	Metrics       metrics.Config
	CadenceSHA256 string
	// wrap, when set, wraps the cell's world outside its profile (Measure).
	wrap func(world.World) world.World
	// pair, when set, runs the cell as one side of an interleaved pair.
	pair *pairRun
	// shared, when set, is what the cell's world shares with its pair's
	// other cell (registry.Kind.Share: the embedded NATS server).
	shared registry.Shared
}

// Label is the cell's short description for progress lines.
func (c CellPlan) Label() string {
	var b strings.Builder
	b.WriteString(c.Scenario.Name)
	for _, k := range sortedKeys(c.Options) {
		if k == "body" && c.Options[k] == "0s" {
			continue
		}
		fmt.Fprintf(&b, " %s=%s", k, c.Options[k])
	}
	if c.Target != nil {
		fmt.Fprintf(&b, " target %s", c.Target.ID())
		return b.String()
	}
	fmt.Fprintf(&b, " %s", c.Version.Name)
	if sw := c.Switches.String(); sw != "none" {
		fmt.Fprintf(&b, " [%s]", sw)
	}
	fmt.Fprintf(&b, " %s/%s", c.World.Name, c.ProfileName)
	return b.String()
}

// Cells are the plan's cells as Validate resolved them (it validates the
// plan first when it was not), in the order the sweep runs them: scenario,
// world, profile, options (branch counts ascending as given), version,
// switch set.
func (p *Plan) Cells() ([]CellPlan, error) {
	if p.resolved == nil {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	return p.resolved.cells, nil
}

// expand expands the matrix of the plan, whose scenarios and worlds (scens,
// kinds: in plan order) and profiles are resolved, into its cells, each
// checked to fit in memory (limit, set as how says) before it is built.
func (p *Plan) expand(scens []*scenarios.Scenario, kinds []*registry.Kind, profiles map[string]resolvedProfile, pacer driver.Pacer,
	limit int64, how string) ([]CellPlan, error) {
	var out []CellPlan
	for i, sp := range p.Scenarios {
		s := scens[i]
		combos := []scenarios.Values{{}}
		for _, o := range s.Options {
			vals := p.optionValues(sp, o.Name)
			if len(vals) == 0 {
				continue // the default
			}
			var next []scenarios.Values
			for _, c := range combos {
				for _, v := range vals {
					n := scenarios.Values{}
					for k, x := range c {
						n[k] = x
					}
					n[o.Name] = v
					next = append(next, n)
				}
			}
			combos = next
		}
		if p.hasReference() {
			cells, err := p.referenceCells(s, sp, combos, kinds, profiles, pacer, limit, how)
			if err != nil {
				return nil, err
			}
			out = append(out, cells...)
		}
		cells, err := p.targetCells(s, sp, combos, pacer, limit, how)
		if err != nil {
			return nil, err
		}
		out = append(out, cells...)
	}
	keys := map[string]bool{}
	for _, c := range out {
		if keys[c.Key] {
			return nil, invalid(fmt.Sprintf("cell %s appears twice in the matrix", c.Key))
		}
		keys[c.Key] = true
	}
	return out, nil
}

// targetCells are the foreign targets' cells of scenario s: one per
// option combination and target (no version, switches, world or profile
// of ours; a mem world only gives the driver its clock).
func (p *Plan) targetCells(s *scenarios.Scenario, sp ScenarioPlan, combos []scenarios.Values, pacer driver.Pacer,
	limit int64, how string) ([]CellPlan, error) {
	targets := p.foreignTargets()
	if len(targets) == 0 {
		return nil, nil
	}
	clockKind, err := registry.Lookup("mem")
	if err != nil {
		return nil, err
	}
	var out []CellPlan
	for _, spec := range targets {
		for _, combo := range combos {
			if err := p.checkSize(s, sp, s.ApplyDefaults(combo), clockKind, limit, how); err != nil {
				return nil, err
			}
			prog, full, err := s.Build(combo)
			if err != nil {
				return nil, &UsageError{Err: err}
			}
			c := CellPlan{Target: &spec, Scenario: s, Options: full, Program: prog, World: clockKind,
				ProfileName: "none", Pacer: pacer}
			c.Key = cellKey(s.Name, full, "", "none", "", "none") + " target=" + spec.ID()
			c.Hash, c.Seed = keyDigest(c.Key, p.Seed)
			out = append(out, p.resolveCell(c))
		}
	}
	return out, nil
}

// referenceCells are the built-in engine's cells of scenario s: every
// world, profile, option combination, version and switch set.
func (p *Plan) referenceCells(s *scenarios.Scenario, sp ScenarioPlan, combos []scenarios.Values, kinds []*registry.Kind,
	profiles map[string]resolvedProfile, pacer driver.Pacer, limit int64, how string) ([]CellPlan, error) {
	var out []CellPlan
	for _, kind := range kinds {
		for _, prof := range p.Profiles {
			for _, combo := range combos {
				if err := p.checkSize(s, sp, s.ApplyDefaults(combo), kind, limit, how); err != nil {
					return nil, err
				}
				prog, full, err := s.Build(combo)
				if err != nil {
					return nil, &UsageError{Err: err}
				}
				for _, v := range p.Versions {
					for _, sw := range p.Switches {
						c := CellPlan{Scenario: s, Options: full, Program: prog, Version: v,
							Switches: sw, Features: sw.Apply(v.Features), World: kind, WorldSettings: p.WorldSettings[kind.Name],
							ProfileName: prof, Profile: profiles[prof].prof, ProfileFiles: profiles[prof].files,
							Pacer: pacer}
						c.Key = cellKey(s.Name, full, v.Name, sw.String(), kind.Name, prof)
						c.Hash, c.Seed = keyDigest(c.Key, p.Seed)
						guard := p.Guard
						if on, set := sw.Guard(); set {
							guard = on
						}
						c.WorldOptions = world.Options{Guard: guard, RetryStyle: p.RetryStyle,
							VisibilityTimeout: p.VisibilityTimeout, Seed: c.Seed}
						out = append(out, p.resolveCell(c))
					}
				}
			}
		}
	}
	return out, nil
}

// resolveCell is c with what follows from its other fields filled in: its
// identity, metrics configuration and cadence.
func (p *Plan) resolveCell(c CellPlan) CellPlan {
	c.Identity = c.identity()
	c.Metrics = p.metricsConfig(c.Program)
	c.CadenceSHA256 = scenarios.CadenceSHA256(c.Program)
	return c
}

// keyDigest returns the hash of a cell's key and its seed under the plan
// seed: the seed mixed with the key, so a cell's randomness does not depend
// on the cells before it.
func keyDigest(key string, planSeed int64) (hash string, seed int64) {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:5]), planSeed ^ keyBits(sum)
}

func keyBits(sum [32]byte) int64 { return int64(binary.BigEndian.Uint64(sum[8:16]) & (1<<62 - 1)) }

// optionValues are the values the plan gives option name of scenario sp:
// the scenario's own, else the plan-wide option, else the branch counts.
func (p *Plan) optionValues(sp ScenarioPlan, name string) []string {
	if v, ok := sp.Options[name]; ok {
		return v
	}
	if v, ok := p.Options[name]; ok {
		return v
	}
	if name == "branches" && len(p.Branches) > 0 {
		out := make([]string, len(p.Branches))
		for i, b := range p.Branches {
			out[i] = strconv.Itoa(b)
		}
		return out
	}
	return nil
}

// cellKey is the canonical identity of a cell.
func cellKey(scenario string, opts scenarios.Values, version, switches, world, profile string) string {
	var b strings.Builder
	b.WriteString("scenario=" + scenario)
	for _, k := range sortedKeys(opts) {
		fmt.Fprintf(&b, " %s=%s", k, opts[k])
	}
	fmt.Fprintf(&b, " version=%s switches=%s world=%s profile=%s", version, switches, world, profile)
	return b.String()
}

// KeyOf is the key of a cell in a results file, to match it against the
// plan's cells when resuming.
func KeyOf(c results.Cell) string {
	sw := "none"
	if len(c.Switches) > 0 {
		set, err := engine.ParseSwitchSet(strings.Join(c.Switches, "+"))
		if err == nil {
			sw = set.String()
		}
	}
	opts := scenarios.Values{}
	for k, v := range c.Options {
		opts[k] = v
	}
	if c.Branches > 0 {
		opts["branches"] = strconv.Itoa(c.Branches)
	}
	if c.Steps > 0 {
		opts["steps"] = strconv.Itoa(c.Steps)
	}
	if s, err := scenarios.Get(c.Scenario); err == nil {
		opts = s.ApplyDefaults(opts)
		_ = s.Validate(opts) // canonical spelling; a foreign option just won't match
	}
	key := cellKey(c.Scenario, opts, c.Version, sw, c.World, c.Profile)
	if c.TargetSpec != "" {
		key += " target=" + c.TargetSpec
	} else if c.Target != "" {
		key += " target=" + c.Target
	}
	return key
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}
