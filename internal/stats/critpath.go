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

// pathAll, given to CompareOptions.Metrics, selects every category.
const pathAll = "critical_path"

// pathMetrics are the metric names of cell's critical-path categories
// that hold time in some run, and unattributed's when it does.
func pathMetrics(cell *results.Cell) []string {
	var out []string
	for _, pc := range cell.CriticalPath {
		for _, v := range pc.Values {
			if v > 0 {
				out = append(out, metrics.PathMetricPrefix+pc.Category)
				break
			}
		}
	}
	return out
}

// pathRank is the report position of a critical-path metric name.
func pathRank(name string) (int, bool) {
	cat, ok := strings.CutPrefix(name, metrics.PathMetricPrefix)
	if !ok {
		return 0, false
	}
	return metrics.CategoryIndex(cat)
}
