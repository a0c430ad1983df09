// Package calibrate fits a latency/fault profile to observed figures: a
// Table of cells (scenario, branches, version, kill switches, world
// options) with the percentiles a production sweep measured, a search over
// the profile's parameters on the sim world that minimises the figures'
// relative error (deterministic for a seed), and the residuals of the fit.
//
// A cell is measured exactly as `durabench sweep --world sim` measures it
// (sweep.Plan.Measure), with the world's calls timed on the side for the
// figures a sweep does not report: a world operation's latency as the
// engine sees it ("op.run_get") and the span of a stage's dispatch
// ("dispatch.create", "dispatch.publish").
package calibrate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// Table is a table of observed figures, read from YAML by Parse.
type Table struct {
	// File is where the table was read from (errors and reports name it).
	File string
	// Profile names the profile fitted to the table: the fitted profile's
	// name, and the name cells are keyed (and seeded) with, so a sweep of
	// the written profile replays the fit (default "fitted").
	Profile string
	// Description describes the fitted profile.
	Description string
	// Reps and Warmup are the default measured and warm-up runs per cell.
	Reps, Warmup int
	// Custom are the table's own versions (custom_versions:, as in a sweep
	// file), which cells may name besides the built-in ones.
	Custom []engine.Version
	Cells  []Observation
}

// version returns the custom or built-in version with that name.
func (t *Table) version(name string) (engine.Version, error) {
	for _, v := range t.Custom {
		if v.Name == name {
			return v, nil
		}
	}
	return engine.LookupVersion(name)
}

// Observation is one observed cell: the conditions of a measurement and its
// figures.
type Observation struct {
	// Line is the cell's line in the table's file.
	Line int
	// Scenario is a sweep scenario (default fanout); Options its options
	// ("branches": "64").
	Scenario string
	Options  map[string]string
	// Version is a built-in engine version or one of the table's custom
	// versions; Switches a kill-switch set
	// ("none", "resilient-step-dispatch=0").
	Version  string
	Switches string
	// RetryStyle and VisibilityTimeout are the world's retry semantics
	// (zero: the sweep's defaults).
	RetryStyle        world.RetryStyle
	VisibilityTimeout time.Duration
	// Reps and Warmup override the table's; 0 runs and a warm-up of -1
	// (unset) take the table's.
	Reps, Warmup int
	// Note says where the figures come from.
	Note    string
	Figures []Figure
}

// Figure is one observed value: a statistic of a metric.
type Figure struct {
	Line int
	// Metric is a results metric ("ttls", "skew", ...), "op.<op>" (every
	// call of a world operation, as the engine waited for it; op.deliver:
	// from a message's publish returning to its first handler starting),
	// "dispatch.create" / "dispatch.publish" (per run, first start to last
	// end of its step_created writes / step-message publishes), "stalls"
	// (Stat "rate": the share of runs that stalled) or "stall_ttls" (the
	// stalled runs' TTLS).
	Metric string
	// Stat is p50, p75, p90, p99, max or mean; rate for stalls.
	Stat string
	// Value is a duration, or a share in [0, 1] for a rate.
	Value float64
	// Unfitted, when set, says why the figure is shown but not fitted:
	// what durabench's engine cannot reproduce together with the table's
	// other figures.
	Unfitted string
}

// weight is the figure's weight in a fit: 0 when it is not fitted.
func (f Figure) weight() float64 {
	if f.Unfitted != "" {
		return 0
	}
	return 1
}

// Stats are the statistics a figure may name.
var Stats = []string{"p50", "p75", "p90", "p99", "max", "mean"}

// IsRate reports whether the figure is a share of runs, not a duration.
func (f Figure) IsRate() bool { return f.Stat == "rate" }

// Format prints v as the figure's value prints ("1.054s", "6.0%").
func (f Figure) Format(v float64) string {
	if f.IsRate() {
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmtDuration(time.Duration(v))
}

// Name is "metric stat" ("ttls p50").
func (f Figure) Name() string { return f.Metric + " " + f.Stat }

// Label is the cell's conditions in one line: "fanout 64 br · resilient
// · resilient-step-dispatch=0 · fresh, VT 5m0s".
func (c Observation) Label() string {
	var parts []string
	head := c.Scenario
	if b, ok := c.Options["branches"]; ok {
		head += " " + b + " br"
	}
	for _, k := range sortedKeys(c.Options) {
		if k != "branches" {
			head += " " + k + "=" + c.Options[k]
		}
	}
	parts = append(parts, head, c.Version)
	if c.Switches != "" && c.Switches != "none" {
		parts = append(parts, c.Switches)
	}
	if c.RetryStyle != "" || c.VisibilityTimeout > 0 {
		w := string(c.RetryStyle)
		if c.VisibilityTimeout > 0 {
			w = strings.TrimSpace(w + " VT " + fmtDuration(c.VisibilityTimeout))
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, " · ")
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// fmtDuration prints d with up to four significant digits in µs, ms or s
// ("848.3ms", "1.054s", "306s").
func fmtDuration(d time.Duration) string {
	v, unit := float64(d)/1e3, "us"
	switch {
	case d >= time.Second:
		v, unit = float64(d)/1e9, "s"
	case d >= time.Millisecond:
		v, unit = float64(d)/1e6, "ms"
	}
	if v >= 1e4 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + unit
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + unit
}
