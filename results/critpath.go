package results

import (
	"fmt"
	"slices"
	"strings"

	"github.com/durabench/durabench/metrics"
)

// PathCategory is one category of a cell's critical path (Cell.CriticalPath):
// each finished run's exclusive time in it on the run's critical path, in
// microseconds, in run order, and their mean, p50 and p90 (nearest rank).
type PathCategory struct {
	Category string  `json:"category"`
	Mean     float64 `json:"mean"`
	P50      int64   `json:"p50"`
	P90      int64   `json:"p90"`
	// Values are one per finished run, in run order: a run's values in
	// every category add up exactly to its TTLS.
	Values []int64 `json:"values"`
}

// pathCategories summarises a collection's critical path (per category,
// per run, µs), every category in report order.
func pathCategories(perRun [][]int64) []PathCategory {
	out := make([]PathCategory, 0, len(perRun))
	for i, vs := range perRun {
		pc := PathCategory{Category: metrics.Categories[i].Name, Values: slices.Clone(vs)}
		if pc.Values == nil {
			pc.Values = []int64{}
		}
		if len(vs) > 0 {
			sorted := slices.Sorted(slices.Values(vs))
			pc.P50, pc.P90 = metrics.Quantile(sorted, 50), metrics.Quantile(sorted, 90)
			var sum float64
			for _, v := range vs {
				sum += float64(v)
			}
			pc.Mean = sum / float64(len(vs))
		}
		out = append(out, pc)
	}
	return out
}

// Path returns the cell's critical-path category name, if it has one.
func (c *Cell) Path(category string) (PathCategory, bool) {
	return pathCategory(c.CriticalPath, category)
}

// CompletionPathCategory returns the category name of the cell's path to
// completion (CompletionPath), if it has one.
func (c *Cell) CompletionPathCategory(category string) (PathCategory, bool) {
	return pathCategory(c.CompletionPath, category)
}

func pathCategory(path []PathCategory, category string) (PathCategory, bool) {
	for _, pc := range path {
		if pc.Category == category {
			return pc, true
		}
	}
	return PathCategory{}, false
}

// PathMetric returns a critical-path category as a Metric, named as
// compare and gate name it (metrics.PathMetricPrefix + category, e.g.
// "critical_path.queue_wait"; a category of the path to completion with
// metrics.CompletionPathMetricPrefix, "critical_path_ttc.queue_wait"): its summary and HDR over its per-run
// values, which are also its PerRun ("run value": one value per run, as
// TTLS). ok is false for any other name, or a category the cell lacks.
func (c *Cell) PathMetric(name string) (Metric, bool) {
	var pc PathCategory
	var ok bool
	if cat, is := strings.CutPrefix(name, metrics.PathMetricPrefix); is && cat != "" {
		pc, ok = c.Path(cat)
	} else if cat, is := strings.CutPrefix(name, metrics.CompletionPathMetricPrefix); is && cat != "" {
		pc, ok = c.CompletionPathCategory(cat)
	}
	if !ok {
		return Metric{}, false
	}
	m := NewMetric(pc.Values, 0)
	m.PerRun, m.PerRunStat = m.Values, string(metrics.RunValue)
	return m, true
}

// validatePath checks a cell's critical_path or critical_path_ttc (at):
// known, distinct categories, one non-negative value per run in each, the
// same runs in all.
func validatePath(name, at string, path []PathCategory) error {
	seen := map[string]bool{}
	for i, pc := range path {
		field := fmt.Sprintf("%s[%d]", at, i)
		bad := func(f, format string, args ...any) error {
			return &InvalidError{File: name, Field: field + f, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case pc.Category == "":
			return bad(".category", "missing")
		case seen[pc.Category]:
			return bad(".category", "%q given twice", pc.Category)
		case pc.Values == nil:
			return bad(".values", "missing")
		case len(pc.Values) != len(path[0].Values):
			return bad(".values", "%d runs, but %s has %d", len(pc.Values), path[0].Category, len(path[0].Values))
		}
		if _, ok := metrics.CategoryIndex(pc.Category); !ok {
			return bad(".category", "unknown category %q", pc.Category)
		}
		seen[pc.Category] = true
		for j, v := range pc.Values {
			if v < 0 {
				return bad(fmt.Sprintf(".values[%d]", j), "negative (%d)", v)
			}
		}
	}
	return nil
}
