package reporters

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// metricOrder is the order metrics appear in tables: the headline latency
// metrics first, overheads after, stream metrics last. Metrics not listed
// follow in name order.
var metricOrder = []string{metrics.TTFS, metrics.TTLS, metrics.Skew, metrics.STSO, metrics.STSOInline, metrics.STSOQueue,
	metrics.WO, metrics.TTC, metrics.SL, metrics.SO, metrics.ResumeToStep}

// tableSkip are metrics kept in the results file but left out of tables:
// skew_offset is one sample per branch (the skew chart draws it), not per run.
var tableSkip = map[string]bool{metrics.SkewOffset: true}

// headlineOrder picks a scenario's headline metric: the first of these a
// scenario's cells have.
var headlineOrder = []string{metrics.TTLS, metrics.STSO, metrics.WO, metrics.TTC, metrics.TTFS, metrics.SL, metrics.SO}

// scenarioGroup is one scenario's cells, in report order.
type scenarioGroup struct {
	Name  string
	Cells []*results.Cell
}

// groupScenarios returns f's cells grouped by scenario, scenarios in plan
// order (unplanned ones after, by name), cells sorted by branches, steps,
// version (plan order), switches, world and profile.
func groupScenarios(f *results.File) []scenarioGroup {
	byName := map[string][]*results.Cell{}
	for i := range f.Cells {
		c := &f.Cells[i]
		byName[c.Scenario] = append(byName[c.Scenario], c)
	}
	names := slices.Sorted(maps.Keys(byName))
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(planIndex(f.Plan.Scenarios, a), planIndex(f.Plan.Scenarios, b))
	})
	versions := make([]string, len(f.Plan.Versions))
	for i, v := range f.Plan.Versions {
		versions[i] = v.Name
	}
	var out []scenarioGroup
	for _, n := range names {
		cells := byName[n]
		slices.SortStableFunc(cells, func(a, b *results.Cell) int {
			return cmp.Or(
				cmp.Compare(a.Branches, b.Branches),
				cmp.Compare(a.Target, b.Target),
				cmp.Compare(a.Steps, b.Steps),
				cmp.Compare(planIndex(versions, a.Version), planIndex(versions, b.Version)),
				cmp.Compare(a.Version, b.Version),
				cmp.Compare(planIndex(f.Plan.Switches, switchSet(a)), planIndex(f.Plan.Switches, switchSet(b))),
				cmp.Compare(switchSet(a), switchSet(b)),
				cmp.Compare(a.World, b.World),
				cmp.Compare(a.Profile, b.Profile),
			)
		})
		out = append(out, scenarioGroup{Name: n, Cells: cells})
	}
	return out
}

// planIndex is the position of name in list, or len(list) when absent, so
// unplanned names sort last.
func planIndex(list []string, name string) int {
	if i := slices.Index(list, name); i >= 0 {
		return i
	}
	return len(list)
}

// switchSet is a cell's kill switches as one string, "none" when empty.
func switchSet(c *results.Cell) string {
	if len(c.Switches) == 0 {
		return "none"
	}
	return strings.Join(c.Switches, ",")
}

// cellKey identifies a cell across two results files (stats.KeyOf, the
// key compare and gate match cells by).
func cellKey(c *results.Cell) stats.CellKey { return stats.KeyOf(c) }

// cellIndex maps cellKey to the cell, for finding a baseline's matching cell.
func cellIndex(f *results.File) map[stats.CellKey]*results.Cell {
	if f == nil {
		return nil
	}
	m := make(map[stats.CellKey]*results.Cell, len(f.Cells))
	for i := range f.Cells {
		m[cellKey(&f.Cells[i])] = &f.Cells[i]
	}
	return m
}

// labeler names cells by the matrix dimensions that vary within a file (and
// its baseline), so labels stay short: "256 br · resilient" rather than the
// whole key.
type labeler struct {
	branches, steps, version, switches, world, profile, options bool
	// targets is set when foreign targets' cells are in the file: the
	// built-in engine's cells then say "reference".
	targets bool
}

func newLabeler(files ...*results.File) labeler {
	seen := map[string]map[string]bool{}
	add := func(dim, v string) {
		if seen[dim] == nil {
			seen[dim] = map[string]bool{}
		}
		seen[dim][v] = true
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		for i := range f.Cells {
			c := &f.Cells[i]
			add("branches", strconv.Itoa(c.Branches))
			add("steps", strconv.Itoa(c.Steps))
			add("version", c.Version)
			add("switches", switchSet(c))
			add("world", c.World)
			add("profile", c.Profile)
			add("options", optionsLabel(c.Options))
			add("target", c.Target)
		}
	}
	varies := func(dim string) bool { return len(seen[dim]) > 1 }
	return labeler{
		// Fan-out width and sequence length are always shown when set: they
		// are what a reader scans a scenario's table by.
		branches: true, steps: true,
		version:  true,
		switches: varies("switches"),
		world:    varies("world"),
		profile:  varies("profile"),
		options:  varies("options"),
		targets:  varies("target"),
	}
}

// label is the cell's short name, e.g. "256 br · resilient · rsd=0".
func (l labeler) label(c *results.Cell) string {
	var parts []string
	if l.branches && c.Branches > 0 {
		parts = append(parts, fmt.Sprintf("%d br", c.Branches))
	}
	if l.steps && c.Steps > 0 {
		parts = append(parts, fmt.Sprintf("%d steps", c.Steps))
	}
	if c.Target != "" {
		// A foreign target has no version, switches or world of ours.
		parts = append(parts, c.Target)
	} else {
		if l.version {
			v := c.Version
			if l.targets {
				v = "reference " + v
			}
			parts = append(parts, v)
		}
		if l.switches && len(c.Switches) > 0 {
			parts = append(parts, strings.Join(c.Switches, ","))
		}
		if l.world || l.profile {
			parts = append(parts, c.World+"/"+c.Profile)
		}
	}
	if l.options && len(c.Options) > 0 {
		parts = append(parts, optionsLabel(c.Options))
	}
	return strings.Join(parts, " · ")
}

func optionsLabel(o map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(o)) {
		parts = append(parts, k+"="+o[k])
	}
	return strings.Join(parts, ",")
}

// orderedMetrics returns the metric names present in any of cells, in table
// order.
func orderedMetrics(cells []*results.Cell) []string {
	present := map[string]bool{}
	for _, c := range cells {
		for name := range c.Metrics {
			present[name] = true
		}
	}
	var out []string
	for _, name := range metricOrder {
		if present[name] {
			out = append(out, name)
			delete(present, name)
		}
	}
	return append(out, slices.Sorted(maps.Keys(present))...)
}

// headlineMetric is the scenario's headline metric, "" when its cells have
// none of the known ones.
func headlineMetric(cells []*results.Cell) string {
	for _, name := range headlineOrder {
		for _, c := range cells {
			if _, ok := c.Metrics[name]; ok {
				return name
			}
		}
	}
	return ""
}

// samples returns a metric's samples in microseconds: the per-run values
// when the file kept them, otherwise values reconstructed from the encoded
// HDR histogram (each recorded value at its bucket's lowest equivalent
// value, within the histogram's 3 significant figures). It returns nil when
// neither is available.
func samples(m results.Metric) []int64 {
	if len(m.Values) > 0 {
		return m.Values
	}
	if m.HDR == "" {
		return nil
	}
	h, err := metrics.DecodeHistogram(m.HDR)
	if err != nil {
		return nil
	}
	var out []int64
	for _, b := range h.Bars() {
		for range b.Count {
			out = append(out, b.From)
		}
	}
	return out
}
