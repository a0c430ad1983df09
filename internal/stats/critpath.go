package stats

import (
	"strings"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// A cell's critical path (results.Cell.CriticalPath) is compared and gated
// like any metric: each category is the metric critical_path.<category>,
// one value per finished run (its exclusive time in the category), tested
// with the same per-run Mann-Whitney test as TTLS. Compare lists the
// categories that hold time in a cell of either side; a gate rule names
// one: critical_path.queue_wait.p50 < 1.10x baseline.

//
// The path to completion (results.Cell.CompletionPath, the runs' TTC
// split) is compared and gated the same way, as critical_path_ttc.<category>;
// compare lists its categories only when asked (--metrics
// critical_path_ttc, or one by name): on most engines it is the TTLS path
// and the terminal write.

// pathAll, given to CompareOptions.Metrics, selects every category;
// completionAll every category of the path to completion.
const (
	pathAll       = metrics.PathMetric
	completionAll = metrics.CompletionPathMetric
)

// KnownMetric reports whether compare and gate know name: a metric
// (metrics.Lookup), a path (critical_path, critical_path_ttc: every
// category of it) or one category of either (critical_path.queue_wait).
func KnownMetric(name string) bool {
	if _, ok := metrics.Lookup(name); ok || name == pathAll || name == completionAll {
		return true
	}
	for _, prefix := range []string{metrics.PathMetricPrefix, metrics.CompletionPathMetricPrefix} {
		if cat, ok := strings.CutPrefix(name, prefix); ok {
			_, known := metrics.CategoryIndex(cat)
			return known
		}
	}
	return false
}

// pathMetrics are the metric names of cell's critical-path categories
// that hold time in some run, and unattributed's when it does.
func pathMetrics(cell *results.Cell) []string {
	return heldCategories(cell.CriticalPath, metrics.PathMetricPrefix)
}

// completionMetrics are pathMetrics of the cell's path to completion.
func completionMetrics(cell *results.Cell) []string {
	return heldCategories(cell.CompletionPath, metrics.CompletionPathMetricPrefix)
}

func heldCategories(path []results.PathCategory, prefix string) []string {
	var out []string
	for _, pc := range path {
		for _, v := range pc.Values {
			if v > 0 {
				out = append(out, prefix+pc.Category)
				break
			}
		}
	}
	return out
}

// pathRank is the report position of a critical-path metric name: the
// TTLS path's categories, then the path to completion's.
func pathRank(name string) (int, bool) {
	if cat, ok := strings.CutPrefix(name, metrics.PathMetricPrefix); ok {
		return metrics.CategoryIndex(cat)
	}
	if cat, ok := strings.CutPrefix(name, metrics.CompletionPathMetricPrefix); ok {
		i, ok := metrics.CategoryIndex(cat)
		return metrics.NumCategories + i, ok
	}
	return 0, false
}
