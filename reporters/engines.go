package reporters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// engineLabel names the engine a cell measured in the engines table: a
// foreign target with what it said it is, or the built-in engine's version
// and world.
func engineLabel(c *results.Cell) string {
	if c.Target != "" {
		if c.Engine == "" || strings.HasPrefix(c.Target, c.Engine+" "+c.EngineVersion) {
			return c.Target // a target's own label names its engine and version
		}
		return fmt.Sprintf("%s (%s %s)", c.Target, c.Engine, c.EngineVersion)
	}
	s := "reference " + c.Version
	if len(c.Switches) > 0 {
		s += " " + shortSwitches(c.Switches)
	}
	return s + " · " + c.World
}

// hasTargets reports whether f holds cells of foreign targets.
func hasTargets(f *results.File) bool {
	for i := range f.Cells {
		if f.Cells[i].Target != "" {
			return true
		}
	}
	return false
}

// engines writes the engines table — every engine side by side, per
// scenario and size, on TTFS, TTLS and skew p50/p99 and TTC p50 (an engine
// may finish its steps long before it records the run done) — and the cells a
// target skipped with its reason. Only for files with foreign targets.
func (m *markdown) engines(sb *strings.Builder) {
	if !hasTargets(m.f) {
		return
	}
	sb.WriteString("### Engines\n\n")
	// Open-paced cells: the driver's lag p99 beside TTFS, which it is part of.
	lag := false
	for _, g := range m.groups {
		lag = lag || hasDriverLag(g.Cells)
	}
	lagHead, lagRule := "", ""
	if lag {
		lagHead, lagRule = " driver lag p99 |", "--:|"
	}
	// An anomalies column when a target found any in its runs' histories.
	anomalies := slices.ContainsFunc(m.f.Cells, func(c results.Cell) bool { return c.Anomalies > 0 })
	head, rule := "", ""
	if anomalies {
		head, rule = " anomalies |", "--:|"
	}
	sb.WriteString("| scenario | size | engine | TTFS p50 | TTFS p99 |" + lagHead + " TTLS p50 | TTLS p99 | skew p50 | skew p99 | TTC p50 | runs | stalls | errors |" + head + "\n")
	sb.WriteString("|---|--:|---|--:|--:|" + lagRule + "--:|--:|--:|--:|--:|--:|--:|--:|" + rule + "\n")
	var skipped []string
	for _, g := range m.groups {
		for _, c := range g.Cells {
			if c.Skipped != "" {
				skipped = append(skipped, fmt.Sprintf("`%s %s` on %s: %s", g.Name, cellSize(c), engineLabel(c), c.Skipped))
				continue
			}
			pq := func(name string) (string, string) {
				mt, ok := c.Metrics[name]
				if !ok || mt.Count == 0 {
					return "-", "-"
				}
				return fmtUS(mt.P50), fmtUS(mt.P99)
			}
			f50, f99 := pq(metrics.TTFS)
			l50, l99 := pq(metrics.TTLS)
			s50, s99 := pq(metrics.Skew)
			c50, _ := pq(metrics.TTC)
			if lag {
				l := "-"
				if c.DriverLag != nil && c.DriverLag.Count > 0 {
					l = fmtUS(c.DriverLag.P99)
				}
				f99 += " | " + l
			}
			fmt.Fprintf(sb, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |",
				g.Name, cellSize(c), engineLabel(c), f50, f99, l50, l99, s50, s99, c50, c.Runs, c.Stalls, c.Errors)
			if anomalies {
				fmt.Fprintf(sb, " %d |", c.Anomalies)
			}
			sb.WriteString("\n")
		}
	}
	if len(skipped) > 0 {
		sb.WriteString("\nSkipped (the target does not run them):\n")
		for _, s := range skipped {
			sb.WriteString("- " + s + "\n")
		}
	}
	sb.WriteString("\nEach engine's figures come from its own engine-side timestamps, converted to the driver's clock (targets: the " +
		"offset of the best of 16 clock round trips at the cell's start, error at most half that round trip; the clock is " +
		"sampled again every 5 s and at the cell's end, and its drift shown under each scenario).\n\n")
}

// cellSize is a cell's size as the engines table shows it: "256 br",
// "100 steps", or "-".
func cellSize(c *results.Cell) string {
	switch {
	case c.Branches > 0:
		return fmt.Sprintf("%d br", c.Branches)
	case c.Steps > 0:
		return fmt.Sprintf("%d steps", c.Steps)
	}
	return "-"
}
