// Package sweep plans and runs a sweep: the matrix of scenarios × options ×
// versions × kill-switch sets × worlds × profiles, declared by flags or a
// strict YAML file and resolved once (Plan.Validate) into cells that carry
// values — scenario, profile, pacer, world — and fit in memory; it runs the
// cells one by one on a fresh world each, journals every finished cell,
// writes the results file and the report, shows progress, and survives
// interruption (a partial results file that --resume completes).
package sweep

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/registry"
)

// ScenarioPlan is one scenario of the plan with its own option values (each
// option may list several values: the matrix grows by their product).
type ScenarioPlan struct {
	Name    string
	Options map[string][]string
}

// Plan is a sweep plan: the settings as the user gave them (flags, sweep
// file) over the defaults. Validate checks them and resolves the plan into
// its cells; everything after reads those.
type Plan struct {
	Scenarios []ScenarioPlan
	// Options apply to every scenario of the plan that declares them.
	Options map[string][]string
	// Branches is the fan-out branch counts (the "branches" option of every
	// scenario that has one).
	Branches []int
	Versions []engine.Version
	// Custom are versions defined in the sweep file as feature sets.
	Custom   []engine.Version
	Switches []engine.SwitchSet
	Worlds   []string
	Profiles []string
	// Faults are profile overrides applied to every profile.
	Faults string

	Reps, Warmup int
	Pace         string
	Concurrency  int
	Rate         float64
	CellTimeout  time.Duration
	// StallThreshold, when set, overrides the default stall rule.
	StallThreshold time.Duration
	// Grace is how long runs in flight may finish after Ctrl-C.
	Grace time.Duration
	Seed  int64
	// MaxMemory is the memory in bytes a cell may use (0: 3/4 of the
	// memory available; see bounds.go): Validate refuses bigger cells.
	MaxMemory int64

	// Spans records where each run's time went (its spans, and the
	// critical path a cell's summary finds in them): --spans on (the
	// default) or off.
	Spans bool

	Guard             bool
	RetryStyle        world.RetryStyle
	VisibilityTimeout time.Duration
	// WorldSettings are each world's own settings (registry.Kind.Settings)
	// by world name, every default filled in.
	WorldSettings map[string]registry.Values
	// External says where the engine runs (see ExternalSettings).
	External ExternalSettings
	// Targets are the engines under test (default: reference, the
	// built-in engine on each world); see TargetSpec.
	Targets []TargetSpec
	// Objectives are p75/p90/p99 latency objectives in ms per metric (the
	// report marks cells over them).
	Objectives map[string][3]float64
	// Interleave runs the plan's A/B pair in one sweep (interleave.go).
	Interleave InterleaveSettings

	// origins records where the user set each field (a flag, or a file's
	// line), so that a default never causes an error (e.g. the default
	// branches on a plan without a fan-out), and errors found later, in
	// Validate, name the flag or the file's line.
	origins map[string]UsageError
	// resolved is what Validate made of the plan.
	resolved *resolution
}

// resolution is the plan resolved: every name looked up and every file read
// once, before anything runs.
type resolution struct {
	cells []CellPlan
	pacer driver.Pacer
	// pairs are the interleaved pairs of cells and interleave their
	// record (nil without --interleave).
	pairs      []cellPair
	interleave *results.Interleave
}

// DefaultPlan is `durabench sweep` with no flags: a fan-out sweep of every
// version, with and without the resilient-dispatch kill switch, at 20, 64
// and 256 branches, on the default world, that finishes in about a minute
// on two cores.
func DefaultPlan() *Plan {
	return &Plan{
		Scenarios:         []ScenarioPlan{{Name: "fanout"}},
		Targets:           []TargetSpec{{Name: Reference}},
		Branches:          []int{20, 64, 256},
		Versions:          engine.DefaultVersions(),
		Switches:          []engine.SwitchSet{{}, {Values: map[string]string{engine.SwitchResilientStepDispatch: "0"}}},
		Worlds:            []string{registry.Default},
		Profiles:          []string{"none"},
		Reps:              10,
		Warmup:            2,
		Pace:              "burst",
		Concurrency:       1,
		CellTimeout:       60 * time.Second,
		Grace:             5 * time.Second,
		Seed:              1,
		Spans:             true,
		RetryStyle:        world.Redeliver,
		VisibilityTimeout: world.DefaultVisibilityTimeout,
		WorldSettings:     worldDefaults(),
		origins:           map[string]UsageError{},
	}
}

// field is one setting of the plan, shared by flags and the sweep file: a
// flag --name and a file key name set the same field through set.
type field struct {
	name string
	// list fields take several values (a YAML sequence, or a comma-separated
	// flag); others exactly one.
	list bool
	help string
	set  func(p *Plan, vals []string) error
}

var fields = []field{
	{"scenario", true, "scenarios to run (see durabench list)", setScenarios},
	{"branches", true, "fan-out branch counts, e.g. 20,64,256", func(p *Plan, v []string) error {
		ns, err := ints(v, 1)
		p.Branches = ns
		return err
	}},
	{"versions", true, "engine versions, or all (see durabench list)", setVersions},
	{"switches", true, "kill-switch sets: none, resilient-step-dispatch=0, lazy-hook-resume=0, guard=on; join switches of one set with +", func(p *Plan, v []string) error {
		p.Switches = nil
		for _, s := range v {
			set, err := engine.ParseSwitchSet(s)
			if err != nil {
				return err
			}
			p.Switches = append(p.Switches, set)
		}
		return nil
	}},
	{"targets", true, "engines under test: reference (the built-in engine on each world), an adapter name (runs durabench-target-NAME; 'NAME --flag=value' passes it flags) or a target URL", setTargets},
	{"world", true, "worlds: " + strings.Join(worldNames(), ", ") + " (see durabench list)", func(p *Plan, v []string) error {
		for _, w := range v {
			if _, err := registry.Lookup(w); err != nil {
				return err
			}
		}
		p.Worlds = dedup(v)
		return nil
	}},
	// Profiles and faults are read, and checked, once in Validate: a
	// fault override depends on the profile it applies to.
	{"profile", true, "latency/fault profiles: " + strings.Join(profile.Names(), ", ") + ", or a profile file", func(p *Plan, v []string) error {
		p.Profiles = dedup(v)
		return nil
	}},
	{"faults", false, "profile overrides, e.g. step_created.transient=2%", func(p *Plan, v []string) error {
		p.Faults = v[0]
		return nil
	}},
	{"reps", false, "measured runs per cell", func(p *Plan, v []string) (err error) {
		p.Reps, err = intMin(v[0], 1)
		return err
	}},
	{"warmup", false, "warm-up runs per cell (executed, discarded)", func(p *Plan, v []string) (err error) {
		p.Warmup, err = intMin(v[0], 0)
		return err
	}},
	{"pace", false, "burst (concurrency runs at once, then the next), closed (keep concurrency runs in flight) or open (rate runs/s, latency from the schedule)", func(p *Plan, v []string) error {
		switch v[0] {
		case "burst", "closed", "open":
			p.Pace = v[0]
			return nil
		}
		return fmt.Errorf("%q is not burst, closed or open", v[0])
	}},
	{"concurrency", false, "runs at once (burst) or in flight (closed)", func(p *Plan, v []string) (err error) {
		p.Concurrency, err = intMin(v[0], 1)
		return err
	}},
	{"rate", false, "runs per second (open pacing)", func(p *Plan, v []string) error {
		r, err := strconv.ParseFloat(strings.TrimSuffix(v[0], "/s"), 64)
		if err != nil || !(r > 0) || r > 1e6 {
			return fmt.Errorf("%q is not a rate > 0 (runs per second)", v[0])
		}
		p.Rate = r
		return nil
	}},
	{"cell-timeout", false, "time a cell's runs may take; unfinished runs are stalls", func(p *Plan, v []string) (err error) {
		p.CellTimeout, err = duration(v[0], true)
		return err
	}},
	{"stall-threshold", false, "TTLS above which a run is a stall (default: the smaller of 10× the cell median and the fastest run + 0.9× the visibility timeout, at least 100ms)", func(p *Plan, v []string) (err error) {
		p.StallThreshold, err = duration(v[0], false)
		return err
	}},
	{"grace", false, "time runs in flight may finish after Ctrl-C", func(p *Plan, v []string) (err error) {
		p.Grace, err = duration(v[0], false)
		return err
	}},
	{"seed", false, "seed of every random choice", func(p *Plan, v []string) (err error) {
		p.Seed, err = strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v[0])
		}
		return nil
	}},
	{"spans", false, "on or off: record where each run's time went (spans, and each cell's critical_path); off leaves the engine's calls untimed, for a measurement of its own floor on the fastest worlds (docs/critical-path.md#cost)", func(p *Plan, v []string) error {
		switch strings.ToLower(strings.TrimSpace(v[0])) {
		case "on", "true":
			p.Spans = true
		case "off", "false":
			p.Spans = false
		default:
			return fmt.Errorf("%q is not on or off", v[0])
		}
		return nil
	}},
	{"guard", false, "worlds enforce the precondition guard (dispatch stays sequential)", func(p *Plan, v []string) (err error) {
		p.Guard, err = boolean(v[0])
		return err
	}},
	{"retry-style", false, "redeliver or fresh", func(p *Plan, v []string) error {
		switch world.RetryStyle(v[0]) {
		case world.Redeliver, world.Fresh:
			p.RetryStyle = world.RetryStyle(v[0])
			return nil
		}
		return fmt.Errorf("%q is not redeliver or fresh", v[0])
	}},
	{"visibility-timeout", false, "time before an unacknowledged message is redelivered", func(p *Plan, v []string) (err error) {
		p.VisibilityTimeout, err = duration(v[0], true)
		return err
	}},
}

func lookupField(name string) (field, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

// set sets a field by name, remembering that the user chose it, and where
// (at: the flag, or the file, line and field).
func (p *Plan) set(name string, vals []string, at UsageError) error {
	f, ok := lookupField(name)
	if !ok {
		return fmt.Errorf("unknown setting %q", name)
	}
	if !f.list && len(vals) != 1 {
		return fmt.Errorf("takes one value, got %d", len(vals))
	}
	if f.list && len(vals) == 0 {
		return fmt.Errorf("needs at least one value")
	}
	if err := f.set(p, vals); err != nil {
		return err
	}
	p.setOrigin(name, at)
	return nil
}

func (p *Plan) setOrigin(name string, at UsageError) {
	if p.origins == nil {
		p.origins = map[string]UsageError{}
	}
	p.origins[name] = at
}

// given reports whether the user set field name.
func (p *Plan) given(name string) bool {
	_, ok := p.origins[name]
	return ok
}

// errAt is a UsageError located where the user set field name (the field
// alone when it holds its default).
func (p *Plan) errAt(name string, err error) error {
	at, ok := p.origins[name]
	if !ok {
		at = UsageError{Field: name}
	}
	at.Err = err
	return &at
}

func setScenarios(p *Plan, v []string) error {
	p.Scenarios = nil
	for _, name := range dedup(v) {
		if _, err := scenarios.Get(name); err != nil {
			return err
		}
		p.Scenarios = append(p.Scenarios, ScenarioPlan{Name: name})
	}
	return nil
}

func setVersions(p *Plan, v []string) error {
	p.Versions = nil
	for _, name := range dedup(v) {
		if name == "all" {
			p.Versions = append(p.Versions, engine.Versions()...)
			p.Versions = append(p.Versions, p.Custom...)
			continue
		}
		ver, err := p.lookupVersion(name)
		if err != nil {
			return err
		}
		p.Versions = append(p.Versions, ver)
	}
	return nil
}

func (p *Plan) lookupVersion(name string) (engine.Version, error) {
	for _, c := range p.Custom {
		if c.Name == name {
			return c, nil
		}
	}
	v, err := engine.LookupVersion(name)
	if err != nil && len(p.Custom) > 0 {
		names := make([]string, len(p.Custom))
		for i, c := range p.Custom {
			names[i] = c.Name
		}
		return v, fmt.Errorf("%w; custom: %s", err, strings.Join(names, ", "))
	}
	return v, err
}

// setOption adds scenario option values given as name=v1,v2 (flags) or a
// name and values (file) to opts.
func setOption(opts map[string][]string, name string, vals []string) error {
	if name == "" {
		return fmt.Errorf("want name=value")
	}
	if len(vals) == 0 {
		return fmt.Errorf("option %s: no value", name)
	}
	opts[name] = vals
	return nil
}

// Validate checks the plan as a whole — options against the scenarios that
// take them, pacing against its parameters, each profile with the fault
// overrides — and resolves it: scenarios looked up, profiles read, the
// pacer made, once, into the cells Cells returns, which carry values only.
// Errors are *UsageErrors naming the setting. Validate again after changing
// the plan.
func (p *Plan) Validate() error {
	p.resolved = nil
	if len(p.Scenarios) == 0 || len(p.Versions) == 0 || len(p.Switches) == 0 || len(p.Worlds) == 0 || len(p.Profiles) == 0 {
		return invalid("the matrix is empty (scenarios, versions, switches, worlds and profiles each need a value)")
	}
	scens := make([]*scenarios.Scenario, len(p.Scenarios))
	for i, sp := range p.Scenarios {
		s, err := scenarios.Get(sp.Name)
		if err != nil {
			return &UsageError{Field: "scenario", Err: err}
		}
		scens[i] = s
	}
	// A global option must be declared by some scenario of the plan, and
	// every value must parse for each scenario that declares it.
	names := make([]string, 0, len(p.Options))
	for n := range p.Options {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		found := false
		for _, s := range scens {
			o, ok := s.Option(n)
			if !ok {
				continue
			}
			found = true
			for _, v := range p.Options[n] {
				if _, err := o.Parse(v); err != nil {
					return &UsageError{Field: "option " + n, Err: err}
				}
			}
		}
		if !found {
			return &UsageError{Field: "option " + n, Msg: fmt.Sprintf("no scenario of the plan (%s) has it", p.scenarioNames())}
		}
	}
	if p.given("branches") && !slices.ContainsFunc(scens, func(s *scenarios.Scenario) bool { return s.HasOption("branches") }) {
		return &UsageError{Field: "branches", Msg: fmt.Sprintf("no scenario of the plan (%s) has branches", p.scenarioNames())}
	}
	for i, sp := range p.Scenarios {
		for n, vals := range sp.Options {
			o, ok := scens[i].Option(n)
			if !ok {
				return &UsageError{Field: "scenario " + sp.Name, Msg: fmt.Sprintf("no option %q", n)}
			}
			for _, v := range vals {
				if _, err := o.Parse(v); err != nil {
					return &UsageError{Field: "scenario " + sp.Name, Err: err}
				}
			}
		}
	}
	switch p.Pace {
	case "open":
		if !(p.Rate > 0) {
			return invalid("pace open needs --rate (runs per second)")
		}
	case "burst", "closed":
		if p.given("rate") {
			return invalid(fmt.Sprintf("rate applies to pace open only (pace is %s)", p.Pace))
		}
	}
	pacer, err := driver.NewPacer(p.Pace, p.Concurrency, p.Rate)
	if err != nil {
		return p.errAt("pace", err)
	}
	kinds := make([]*registry.Kind, len(p.Worlds))
	for i, name := range p.Worlds {
		k, err := registry.Lookup(name)
		if err != nil {
			return p.errAt("world", err)
		}
		if k.Check != nil {
			if err := k.Check(p.WorldSettings[name]); err != nil {
				return &UsageError{Err: err}
			}
		}
		kinds[i] = k
	}
	if err := p.validateExternal(); err != nil {
		return err
	}
	profiles, err := p.resolveProfiles()
	if err != nil {
		return err
	}
	limit, how := p.memoryLimit()
	cells, err := p.expand(scens, kinds, profiles, pacer, limit, how)
	if err != nil {
		return err
	}
	pairs, rec, err := p.resolvePairs(cells)
	if err != nil {
		return err
	}
	p.resolved = &resolution{cells: cells, pacer: pacer, pairs: pairs, interleave: rec}
	return nil
}

// resolvedProfile is one profile of the plan, read once: with the fault
// overrides applied, and the files it was read from.
type resolvedProfile struct {
	prof  *profile.Profile
	files map[string][]byte
}

// resolveProfiles reads each profile of the plan and applies the fault
// overrides to it. An error names --profile, or --faults when an override
// is wrong.
func (p *Plan) resolveProfiles() (map[string]resolvedProfile, error) {
	out := map[string]resolvedProfile{}
	for _, name := range p.Profiles {
		files := &profile.FileSet{}
		prof, err := profile.Resolve(name, p.Faults, files.Read)
		if err != nil {
			if pe := (*profile.Error)(nil); errors.As(err, &pe) && pe.Override != "" {
				return nil, p.errAt("faults", err)
			}
			return nil, p.errAt("profile", err)
		}
		out[name] = resolvedProfile{prof: prof, files: files.Files}
	}
	return out, nil
}

func (p *Plan) scenarioNames() string {
	n := make([]string, len(p.Scenarios))
	for i, s := range p.Scenarios {
		n[i] = s.Name
	}
	return strings.Join(n, ", ")
}

func ints(v []string, minimum int) ([]int, error) {
	out := make([]int, 0, len(v))
	for _, s := range v {
		n, err := intMin(s, minimum)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func intMin(s string, minimum int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	if n < minimum {
		return 0, fmt.Errorf("%d is less than %d", n, minimum)
	}
	return n, nil
}

func duration(s string, positive bool) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30s)", s)
	}
	if d < 0 || positive && d == 0 {
		return 0, fmt.Errorf("%s must be > 0", d)
	}
	return d, nil
}

func boolean(s string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not true or false", s)
	}
	return b, nil
}

func dedup(v []string) []string {
	out := make([]string, 0, len(v))
	for _, s := range v {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
