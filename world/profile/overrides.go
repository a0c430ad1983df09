package profile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/durabench/durabench/world"
)

// ApplyOverrides returns a copy of p changed by overrides, a comma-separated
// list of TARGET.FIELD=VALUE items (the --faults flag), e.g.
//
//	step_created.transient=2%,publish.latency=fixed:30ms,log_load.capacity=8
//
// TARGET is an op, "default" or a group name; FIELD is latency (ParseDist's
// compact form), transient (a percentage), capacity (a whole number >= 1) or
// per_event (a duration; log_load and default only); a group takes only
// capacity. Setting an op's own capacity takes it out of its group. Items
// apply left to right; p is not modified. Errors name the override and wrap
// ErrInvalid.
func ApplyOverrides(p *Profile, overrides string) (*Profile, error) {
	return ApplyOverridesWith(p, overrides, nil)
}

// ApplyOverridesWith is ApplyOverrides reading hdr files with read (nil:
// the file system).
func ApplyOverridesWith(p *Profile, overrides string, read ReadFile) (*Profile, error) {
	out := p.Clone()
	for item := range strings.SplitSeq(overrides, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if err := out.override(item, read); err != nil {
			return nil, err
		}
		out.Overrides = append(out.Overrides, item)
	}
	return out, nil
}

func (p *Profile) override(item string, read ReadFile) error {
	fail := func(format string, args ...any) error {
		return &Error{Override: item, Msg: fmt.Sprintf(format, args...)}
	}
	key, value, ok := strings.Cut(item, "=")
	if !ok {
		return fail("expected TARGET.FIELD=VALUE, e.g. step_created.transient=2%%")
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	target, field, ok := strings.Cut(key, ".")
	if !ok {
		return fail("expected TARGET.FIELD=VALUE, e.g. step_created.transient=2%%")
	}
	for i := range p.Groups {
		g := &p.Groups[i]
		if g.Name != target {
			continue
		}
		if field != "capacity" {
			return fail("a group has only a capacity, not %q", field)
		}
		c, err := parseCapacity(value)
		if err != nil {
			return fail("%v", err)
		}
		g.Capacity = c
		return nil
	}
	op := world.Op(target)
	if target != "default" && !knownOps()[op] {
		names := append([]string{"default"}, opNames()...)
		for _, g := range p.Groups {
			names = append(names, g.Name)
		}
		return fail("unknown op or group %q%s", target, unknown(target, names))
	}
	r := p.Default
	if target != "default" {
		r = p.Ops[op]
	}
	switch field {
	case "latency":
		d, err := parseDist(value, "", read)
		if err != nil {
			return fail("%v", err)
		}
		r.Latency, r.Set = d, r.Set|FieldLatency
	case "transient":
		t, err := parsePercent(value)
		if err != nil {
			return fail("%v", err)
		}
		r.Transient, r.Set = t, r.Set|FieldTransient
	case "capacity":
		c, err := parseCapacity(value)
		if err != nil {
			return fail("%v", err)
		}
		r.Capacity, r.Set = c, r.Set|FieldCapacity
		if target != "default" {
			for i := range p.Groups {
				p.Groups[i].Ops = slices.DeleteFunc(p.Groups[i].Ops, func(o world.Op) bool { return o == op })
			}
		}
	case "concurrency":
		if op != world.OpDeliver {
			return fail("only deliver has a concurrency (how many handlers run at once)")
		}
		c, err := parseConcurrency(value)
		if err != nil {
			return fail("%v", err)
		}
		r.Concurrency, r.Set = c, r.Set|FieldConcurrency
	case "per_event":
		if target != "default" && op != world.OpLoad {
			return fail("only log_load has a per-event cost")
		}
		d, err := parseDuration(value)
		if err != nil {
			return fail("%v", err)
		}
		r.PerEvent, r.Set = d, r.Set|FieldPerEvent
	default:
		return fail("unknown field %q%s", field, unknown(field, []string{"latency", "transient", "capacity", "per_event", "concurrency"}))
	}
	if target == "default" {
		p.Default = r
	} else {
		if p.Ops == nil {
			p.Ops = map[world.Op]Rule{}
		}
		p.Ops[op] = r
	}
	return nil
}
