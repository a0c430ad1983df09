// Package profile makes any world behave like a real backend: a Profile gives
// each world operation a latency distribution, a transient error rate and a
// capacity (at most K calls in flight, the rest queue), plus a per-event cost
// for loading a run's log; Wrap applies a profile to a world.
//
// Profiles ship by name (none, lan, cloud — see Names) or come from a YAML
// file (Parse); ApplyOverrides adjusts one for a single sweep
// ("step_created.transient=2%").
package profile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durabench/durabench/world"
)

// Profile is a latency and fault profile: how each world operation behaves.
type Profile struct {
	// Name identifies the profile in results and reports.
	Name string
	// Description says what backend the profile models.
	Description string
	// Source is "builtin" or the file the profile was read from.
	Source string
	// Default applies to every op field-by-field where Ops does not set the
	// field.
	Default Rule
	// Ops are the rules of ops that have their own entry.
	Ops map[world.Op]Rule
	// Groups share one capacity among several ops.
	Groups []Group
	// Targets are p75/p90/p99 targets per metric ("ttfs", "sl", ...) for
	// reports on worlds run under this profile.
	Targets map[string]Targets
	// Overrides are the fault overrides applied on top of the profile as
	// loaded (see ApplyOverrides), in order.
	Overrides []string
}

// Label is the name a result records: Name, followed by the overrides in
// brackets when there are any ("cloud[step_created.transient=2%]").
func (p *Profile) Label() string {
	if len(p.Overrides) == 0 {
		return p.Name
	}
	return p.Name + "[" + strings.Join(p.Overrides, ",") + "]"
}

// Field is a bit set of the settings a Rule carries.
type Field uint8

// The settings of a Rule.
const (
	FieldLatency Field = 1 << iota
	FieldTransient
	FieldCapacity
	FieldPerEvent
	FieldConcurrency
)

// Rule is how one op behaves. A rule in Profile.Ops sets only the fields in
// Set; the others come from Profile.Default.
type Rule struct {
	// Latency is added to every call (nil: none).
	Latency Dist
	// Transient is the probability, in [0, 1], that a call fails with a
	// transient error (see Wrap for what a failure does).
	Transient float64
	// Capacity is how many calls of the op may be in flight at once; the
	// rest queue. 0 means no limit.
	Capacity int
	// PerEvent is added per event of the returned log (log_load only), so a
	// long log is slower to load.
	PerEvent time.Duration
	// Concurrency (deliver only) is how many of a consumer's deliveries the
	// platform runs at once (a deployment's function concurrency). The
	// wrapped world offers it in Capabilities; the engine asks Consume for
	// it unless told its own (its default is 64).
	Concurrency int
	// Set says which fields the rule sets.
	Set Field
}

// Group is a set of ops sharing one capacity: at most Capacity calls of all
// of them together are in flight.
type Group struct {
	Name     string
	Ops      []world.Op
	Capacity int
}

// Targets are a metric's p75, p90 and p99 targets.
type Targets [3]time.Duration

// merge returns r with the fields it does not set taken from def.
func (r Rule) merge(def Rule) Rule {
	out := def
	if r.Set&FieldLatency != 0 {
		out.Latency = r.Latency
	}
	if r.Set&FieldTransient != 0 {
		out.Transient = r.Transient
	}
	if r.Set&FieldCapacity != 0 {
		out.Capacity = r.Capacity
	}
	if r.Set&FieldPerEvent != 0 {
		out.PerEvent = r.PerEvent
	}
	if r.Set&FieldConcurrency != 0 {
		out.Concurrency = r.Concurrency
	}
	out.Set = r.Set | def.Set
	return out
}

// For returns the rule that applies to op: its own entry over the default.
// When op is in a group, the group's capacity applies instead (see Group).
func (p *Profile) For(op world.Op) Rule {
	r := p.Default
	if own, ok := p.Ops[op]; ok {
		r = own.merge(p.Default)
	}
	if g := p.groupOf(op); g != nil {
		r.Capacity = 0 // the group's permits, not the op's own
	}
	if op != world.OpLoad {
		r.PerEvent = 0
	}
	if op != world.OpDeliver {
		r.Concurrency = 0
	}
	return r
}

// Expected returns the mean latency the profile adds to calling ops one
// after another (a critical path), without queueing for capacity, faults or
// per-event cost: what a single uncontended run should measure on top of the
// bare world.
func (p *Profile) Expected(ops ...world.Op) time.Duration {
	var sum time.Duration
	for _, op := range ops {
		if d := p.For(op).Latency; d != nil {
			sum += d.Mean()
		}
	}
	return sum
}

// GroupOf returns the group op is in, or nil.
func (p *Profile) GroupOf(op world.Op) *Group { return p.groupOf(op) }

func (p *Profile) groupOf(op world.Op) *Group {
	for i := range p.Groups {
		if slices.Contains(p.Groups[i].Ops, op) {
			return &p.Groups[i]
		}
	}
	return nil
}

// inert reports whether the profile changes nothing: no latency, faults,
// capacity or per-event cost anywhere.
func (p *Profile) inert() bool {
	for _, g := range p.Groups {
		if len(g.Ops) > 0 {
			return false
		}
	}
	for _, op := range world.Ops() {
		r := p.For(op)
		if r.Latency != nil || r.Transient > 0 || r.Capacity > 0 || r.PerEvent > 0 || r.Concurrency > 0 {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of p (distributions are immutable and shared).
func (p *Profile) Clone() *Profile {
	c := *p
	c.Ops = maps.Clone(p.Ops)
	if c.Ops == nil {
		c.Ops = map[world.Op]Rule{}
	}
	c.Groups = slices.Clone(p.Groups)
	for i := range c.Groups {
		c.Groups[i].Ops = slices.Clone(c.Groups[i].Ops)
	}
	c.Targets = maps.Clone(p.Targets)
	c.Overrides = slices.Clone(p.Overrides)
	return &c
}

// Validate checks what Parse checks, for profiles built or changed in Go.
// Errors wrap ErrInvalid.
func (p *Profile) Validate() error {
	known := knownOps()
	check := func(field string, r Rule) error {
		switch {
		case r.Transient < 0 || r.Transient > 1:
			return &Error{Field: field + ".transient", Msg: fmtPercent(r.Transient) + " is not in 0–100%"}
		case r.Capacity < 0:
			return &Error{Field: field + ".capacity", Msg: fmt.Sprintf("%d must be at least 1", r.Capacity)}
		case r.PerEvent < 0:
			return &Error{Field: field + ".per_event", Msg: "is negative"}
		case r.Concurrency < 0:
			return &Error{Field: field + ".concurrency", Msg: fmt.Sprintf("%d must be at least 1", r.Concurrency)}
		case r.Concurrency > 0 && field != "ops."+string(world.OpDeliver):
			return &Error{Field: field + ".concurrency", Msg: "only deliver has a concurrency"}
		}
		return nil
	}
	if err := check("ops.default", p.Default); err != nil {
		return err
	}
	for _, op := range slices.Sorted(maps.Keys(p.Ops)) {
		if !known[op] {
			return &Error{Field: "ops." + string(op), Msg: "unknown op"}
		}
		if err := check("ops."+string(op), p.Ops[op]); err != nil {
			return err
		}
	}
	seen := map[world.Op]string{}
	for _, g := range p.Groups {
		if len(g.Ops) == 0 {
			continue // emptied by overrides
		}
		if g.Capacity < 1 {
			return &Error{Field: "groups." + g.Name + ".capacity", Msg: fmt.Sprintf("%d must be at least 1", g.Capacity)}
		}
		for _, op := range g.Ops {
			if !known[op] {
				return &Error{Field: "groups." + g.Name + ".ops", Msg: fmt.Sprintf("unknown op %q", op)}
			}
			if other, dup := seen[op]; dup {
				return &Error{Field: "groups." + g.Name + ".ops", Msg: fmt.Sprintf("%s is already in group %s", op, other)}
			}
			seen[op] = g.Name
		}
	}
	return nil
}

func knownOps() map[world.Op]bool {
	m := map[world.Op]bool{}
	for _, op := range world.Ops() {
		m[op] = true
	}
	return m
}

// Describe returns a multi-line, human-readable summary: each op with its
// own entry, its latency (with p50 and p99), transient rate, capacity and
// per-event cost; groups; targets.
func (p *Profile) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", p.Label(), p.Source)
	if p.Description != "" {
		fmt.Fprintf(&b, ": %s", p.Description)
	}
	b.WriteByte('\n')
	if p.inert() {
		b.WriteString("  no latency, no faults, no capacity limits: the world is used as is\n")
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  op\tlatency\tp50\tp99\ttransient\tcapacity\tper event")
	row := func(name string, r Rule, group *Group) {
		lat, p50, p99 := "-", "-", "-"
		if r.Latency != nil {
			lat, p50, p99 = r.Latency.String(), fmtDur(round3(r.Latency.Quantile(0.5))), fmtDur(round3(r.Latency.Quantile(0.99)))
		}
		tr, capa, pe := "-", "-", "-"
		if r.Transient > 0 {
			tr = fmtPercent(r.Transient)
		}
		if group != nil {
			capa = fmt.Sprintf("%d (group %s)", group.Capacity, group.Name)
		} else if r.Capacity > 0 {
			capa = fmt.Sprint(r.Capacity)
		}
		if r.PerEvent > 0 {
			pe = fmtDur(r.PerEvent)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, lat, p50, p99, tr, capa, pe)
	}
	row("default", p.Default, nil)
	for _, op := range world.Ops() {
		if _, own := p.Ops[op]; own {
			row(string(op), p.For(op), p.groupOf(op))
		}
	}
	tw.Flush()
	if c := p.For(world.OpDeliver).Concurrency; c > 0 {
		fmt.Fprintf(&b, "  deliveries: at most %d handlers of a consumer at once\n", c)
	}
	for _, g := range p.Groups {
		if len(g.Ops) == 0 {
			continue
		}
		ops := make([]string, len(g.Ops))
		for i, op := range g.Ops {
			ops[i] = string(op)
		}
		fmt.Fprintf(&b, "  group %s: at most %d in flight among %s\n", g.Name, g.Capacity, compactOps(ops))
	}
	if len(p.Targets) > 0 {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(p.Targets)) {
			t := p.Targets[m]
			parts = append(parts, fmt.Sprintf("%s %s/%s/%s", m, fmtDur(t[0]), fmtDur(t[1]), fmtDur(t[2])))
		}
		fmt.Fprintf(&b, "  targets (p75/p90/p99): %s\n", strings.Join(parts, ", "))
	}
	return b.String()
}

// round3 rounds d to three significant digits for display.
func round3(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for d/unit >= 1000 {
		unit *= 10
	}
	return d.Round(unit)
}

// compactOps prints "appends" for the full set of append ops.
func compactOps(ops []string) string {
	var appends []string
	for k := world.RunCreated; k <= world.StreamClosed; k++ {
		appends = append(appends, string(world.AppendOp(k)))
	}
	var rest []string
	all := true
	for _, a := range appends {
		if !slices.Contains(ops, a) {
			all = false
		}
	}
	for _, op := range ops {
		if !all || !slices.Contains(appends, op) {
			rest = append(rest, op)
		}
	}
	if all {
		rest = append([]string{"all appends"}, rest...)
	}
	return strings.Join(rest, ", ")
}
