package reporters

import (
	"fmt"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// driverLagRow names driver lag's rows in a markdown table (a cell keeps it
// beside its metrics, in DriverLag).
const driverLagRow = metrics.DriverLag

// DriverLagShare is the share of a cell's TTFS p50 its driver lag p99 may
// reach before a report warns: above it, at least one run in a hundred
// started late by more than a tenth of a typical run's time to first
// step, and the cell's tail latencies are the driver's as much as the
// engine's (open pacing charges lag to the engine).
const DriverLagShare = 0.10

// hasDriverLag reports whether any of cells recorded driver lag (open
// pacing).
func hasDriverLag(cells []*results.Cell) bool {
	for _, c := range cells {
		if c.DriverLag != nil && c.DriverLag.Count > 0 {
			return true
		}
	}
	return false
}

// lagWarnings returns, for each of cells whose driver lag p99 is over
// DriverLagShare of its TTFS p50, one line saying so.
func lagWarnings(cells []*results.Cell, lab labeler) []string {
	var out []string
	for _, c := range cells {
		ttfs, ok := c.Metrics["ttfs"]
		if c.DriverLag == nil || c.DriverLag.Count == 0 || !ok || ttfs.Count == 0 {
			continue
		}
		if float64(c.DriverLag.P99) > DriverLagShare*float64(ttfs.P50) {
			out = append(out, fmt.Sprintf("%s: driver lag p99 %s is over %.0f%% of TTFS p50 %s: the driver, not the engine, set the tail%s",
				lab.label(c), fmtUS(c.DriverLag.P99), 100*DriverLagShare, fmtUS(ttfs.P50), busy(c.CPU)))
		}
	}
	return out
}

// busy says, for a lag warning, how many cores durabench and the target
// it started kept busy during the cell and, when recorded, what a virtual
// machine's host took from its vCPUs (steal): a target that keeps the
// cores busy delays the driver's wake-ups, and so does a host that takes
// the vCPUs away.
func busy(c *results.CellCPU) string {
	if c == nil {
		return ""
	}
	s := fmt.Sprintf(" (durabench kept %.2f cores busy", c.DurabenchCores)
	if c.TargetCores != nil {
		s += fmt.Sprintf(", the target %.2f", *c.TargetCores)
	}
	if c.StealCores != nil {
		s += fmt.Sprintf("; the host took %.2f (steal)", *c.StealCores)
	}
	return s + ")"
}
