package calibrate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// A Param is one number of a profile the search may change.
type Param struct {
	// Name is "<op or default>.latency" (the median; the distribution
	// keeps its shape), "<op>.per_event", "<op or group>.capacity",
	// "<op>.transient" or "deliver.concurrency".
	Name string
	kind paramKind
	// target is the op ("default" for the default rule) or the group.
	target string
}

type paramKind uint8

const (
	kindLatency paramKind = iota
	kindPerEvent
	kindCapacity
	kindTransient
	kindConcurrency
)

// integer reports whether the parameter is a whole number (a capacity or a
// concurrency).
func (pa Param) integer() bool { return pa.kind == kindCapacity || pa.kind == kindConcurrency }

// Bounds of the search, as factors of a parameter's starting value, and
// of a transient rate.
const (
	spread       = 100
	minTransient = 1e-5
	maxTransient = 0.5
)

// Params lists the parameters of base that a search changes: the latency of
// the default rule and of every op rule that sets one (scaled, the shape
// kept; recorded hdr distributions are data and stay), log_load's
// per-event cost, every capacity (a group's or an op's own), deliver's
// concurrency when base sets one, and the
// transient rate of every op rule that sets one. stalls adds step_created's
// transient rate: a stall figure is what tells how often that write fails,
// and it is the write whose failure the engine's recovery covers.
func Params(base *profile.Profile, stalls bool) []Param {
	var out []Param
	rule := func(target string, r profile.Rule) {
		if r.Set&profile.FieldLatency != 0 && r.Latency != nil && scalable(r.Latency) {
			out = append(out, Param{Name: target + ".latency", kind: kindLatency, target: target})
		}
		if r.Set&profile.FieldPerEvent != 0 && (target == string(world.OpLoad) || target == "default") {
			out = append(out, Param{Name: target + ".per_event", kind: kindPerEvent, target: target})
		}
		if r.Set&profile.FieldCapacity != 0 {
			out = append(out, Param{Name: target + ".capacity", kind: kindCapacity, target: target})
		}
		if r.Set&profile.FieldConcurrency != 0 && target == string(world.OpDeliver) {
			out = append(out, Param{Name: target + ".concurrency", kind: kindConcurrency, target: target})
		}
		if r.Set&profile.FieldTransient != 0 && r.Transient > 0 {
			out = append(out, Param{Name: target + ".transient", kind: kindTransient, target: target})
		}
	}
	rule("default", base.Default)
	for _, op := range world.Ops() {
		if r, ok := base.Ops[op]; ok {
			rule(string(op), r)
		}
	}
	for _, g := range base.Groups {
		if len(g.Ops) > 0 {
			out = append(out, Param{Name: g.Name + ".capacity", kind: kindCapacity, target: g.Name})
		}
	}
	sc := string(world.AppendOp(world.StepCreated)) + ".transient"
	if stalls && !slices.ContainsFunc(out, func(p Param) bool { return p.Name == sc }) {
		out = append(out, Param{Name: sc, kind: kindTransient, target: string(world.AppendOp(world.StepCreated))})
	}
	return out
}

func scalable(d profile.Dist) bool {
	switch d.(type) {
	case profile.Fixed, profile.Normal, profile.LogNormal:
		return true
	}
	return false
}

// get returns the parameter's value in p: a duration in ns, a capacity, or
// a rate.
func (pa Param) get(p *profile.Profile) float64 {
	switch pa.kind {
	case kindCapacity:
		for _, g := range p.Groups {
			if g.Name == pa.target {
				return float64(g.Capacity)
			}
		}
		return float64(pa.rule(p).Capacity)
	case kindConcurrency:
		return float64(pa.rule(p).Concurrency)
	case kindLatency:
		return float64(pa.rule(p).Latency.Quantile(0.5))
	case kindPerEvent:
		return float64(pa.rule(p).PerEvent)
	default:
		return pa.rule(p).Transient
	}
}

func (pa Param) rule(p *profile.Profile) profile.Rule {
	if pa.target == "default" {
		return p.Default
	}
	return p.Ops[world.Op(pa.target)]
}

// set sets the parameter to v in p (a clone the caller owns), v already
// quantized.
func (pa Param) set(p *profile.Profile, v float64) {
	if pa.kind == kindCapacity {
		for i := range p.Groups {
			if p.Groups[i].Name == pa.target {
				p.Groups[i].Capacity = int(v)
				return
			}
		}
	}
	r := pa.rule(p)
	switch pa.kind {
	case kindCapacity:
		r.Capacity = int(v)
	case kindConcurrency:
		r.Concurrency = int(v)
	case kindLatency:
		r.Latency = scaleTo(r.Latency, time.Duration(v))
	case kindPerEvent:
		r.PerEvent = time.Duration(v)
	case kindTransient:
		r.Transient = v
		r.Set |= profile.FieldTransient
	}
	if pa.target == "default" {
		p.Default = r
	} else {
		p.Ops[world.Op(pa.target)] = r
	}
}

// scaleTo returns d scaled so that its median is m, its shape kept.
func scaleTo(d profile.Dist, m time.Duration) profile.Dist {
	switch d := d.(type) {
	case profile.Fixed:
		return profile.Fixed(m)
	case profile.Normal:
		f := float64(m) / float64(max(d.Mu, 1))
		return profile.Normal{Mu: m, StdDev: quantDur(float64(d.StdDev) * f)}
	case profile.LogNormal:
		f := float64(m) / float64(d.Median)
		return profile.LogNormal{Median: m, P99: max(m, quantDur(float64(d.P99)*f))}
	}
	return d
}

// quantize rounds v to what a profile file holds: three significant digits
// (durations whole µs), capacities whole permits, a rate below the search's
// floor is 0.
func (pa Param) quantize(v float64) float64 {
	switch pa.kind {
	case kindCapacity, kindConcurrency:
		return max(1, math.Round(v))
	case kindTransient:
		if v < minTransient*1.5 {
			return 0
		}
		return sig3(min(v, maxTransient))
	}
	return float64(quantDur(v))
}

func quantDur(ns float64) time.Duration {
	us := max(1, sig3(ns/1e3))
	return time.Duration(math.Round(us)) * time.Microsecond
}

// sig3 rounds x > 0 to three significant digits.
func sig3(x float64) float64 {
	if x <= 0 {
		return 0
	}
	e := math.Pow(10, math.Floor(math.Log10(x))-2)
	return math.Round(x/e) * e
}

// format prints a parameter's value as a profile file writes it.
func (pa Param) format(v float64) string {
	switch pa.kind {
	case kindCapacity, kindConcurrency:
		return fmt.Sprint(int(v))
	case kindTransient:
		return strings.TrimSuffix(fmt.Sprintf("%.4g", 100*v), ".") + "%"
	}
	return strings.ReplaceAll(time.Duration(v).String(), "µ", "u")
}
