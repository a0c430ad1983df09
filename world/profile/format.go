package profile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/durabench/durabench/world"
)

// Format writes p as a profile file that Parse reads back to the same
// profile: name, description, one line per op rule (default first, then the
// ops in world.Ops order), groups and targets. header, when set, goes
// first, each line as a "# " comment. Overrides are not written: their
// effect is in the values. An hdr latency is written as its source file.
func Format(p *Profile, header string) []byte {
	var b strings.Builder
	if header != "" {
		for line := range strings.SplitSeq(strings.TrimRight(header, "\n"), "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	fmt.Fprintf(&b, "name: %s\n", p.Name)
	if p.Description != "" {
		fmt.Fprintf(&b, "description: %s\n", yamlString(p.Description))
	}
	b.WriteString("ops:\n")
	if p.Default.Set != 0 {
		fmt.Fprintf(&b, "  default: %s\n", formatRule(p.Default))
	}
	for _, op := range world.Ops() {
		if r, ok := p.Ops[op]; ok {
			fmt.Fprintf(&b, "  %s: %s\n", op, formatRule(r))
		}
	}
	if p.Default.Set == 0 && len(p.Ops) == 0 {
		b.WriteString("  {}\n")
	}
	var groups []Group
	for _, g := range p.Groups {
		if len(g.Ops) > 0 {
			groups = append(groups, g)
		}
	}
	if len(groups) > 0 {
		b.WriteString("groups:\n")
		for _, g := range groups {
			fmt.Fprintf(&b, "  %s: {ops: [%s], capacity: %d}\n", g.Name, groupOps(g.Ops), g.Capacity)
		}
	}
	if len(p.Targets) > 0 {
		b.WriteString("targets:\n")
		for _, m := range slices.Sorted(maps.Keys(p.Targets)) {
			t := p.Targets[m]
			fmt.Fprintf(&b, "  %s: [%s, %s, %s]\n", m, fmtDur(t[0]), fmtDur(t[1]), fmtDur(t[2]))
		}
	}
	return []byte(b.String())
}

// formatRule writes the fields r sets as a flow mapping.
func formatRule(r Rule) string {
	var parts []string
	if r.Set&FieldLatency != 0 && r.Latency != nil {
		parts = append(parts, "latency: "+formatDist(r.Latency))
	}
	if r.Set&FieldTransient != 0 {
		parts = append(parts, "transient: "+fmtPercent(r.Transient))
	}
	if r.Set&FieldCapacity != 0 {
		parts = append(parts, "capacity: "+strconv.Itoa(r.Capacity))
	}
	if r.Set&FieldPerEvent != 0 {
		parts = append(parts, "per_event: "+fmtDur(r.PerEvent))
	}
	if r.Set&FieldConcurrency != 0 {
		parts = append(parts, "concurrency: "+strconv.Itoa(r.Concurrency))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func formatDist(d Dist) string {
	switch d := d.(type) {
	case Fixed:
		return "{dist: fixed, value: " + fmtDur(d.Mean()) + "}"
	case Normal:
		return "{dist: normal, mean: " + fmtDur(d.Mu) + ", stddev: " + fmtDur(d.StdDev) + "}"
	case LogNormal:
		return "{dist: lognormal, median: " + fmtDur(d.Median) + ", p99: " + fmtDur(d.P99) + "}"
	case *Empirical:
		return "{dist: hdr, file: " + yamlString(d.source) + "}"
	}
	return yamlString(d.String())
}

// groupOps writes a group's ops in their order, "appends" for the full set
// of appends (where the first append was).
func groupOps(ops []world.Op) string {
	all := true
	for k := world.RunCreated; k <= world.StreamClosed; k++ {
		all = all && slices.Contains(ops, world.AppendOp(k))
	}
	var names []string
	for _, op := range ops {
		isAppend := slices.Contains(appendOps(), op)
		switch {
		case all && isAppend && !slices.Contains(names, "appends"):
			names = append(names, "appends")
		case all && isAppend:
		default:
			names = append(names, string(op))
		}
	}
	return strings.Join(names, ", ")
}

func appendOps() []world.Op {
	var ops []world.Op
	for k := world.RunCreated; k <= world.StreamClosed; k++ {
		ops = append(ops, world.AppendOp(k))
	}
	return ops
}

// yamlString quotes s when YAML would not read it back as the same plain
// string.
func yamlString(s string) string {
	if s == "" || strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`\n") || strings.TrimSpace(s) != s {
		return strconv.Quote(s)
	}
	return s
}
