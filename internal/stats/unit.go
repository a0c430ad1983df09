package stats

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Units of a test: what one value of the tested sample is.
const (
	// UnitRun: one value per run (the metric's own per-run value, or one
	// aggregate of the run's samples). Runs are independent; the samples
	// of one run are not.
	UnitRun = "run"
	// UnitSample: the pooled samples of every run, the fallback for a
	// results file written before durabench kept per-run aggregates. Its
	// p-values overstate significance; the comparison warns.
	UnitSample = "sample"
)

// tested is the sample a test runs on for one metric of one cell.
type tested struct {
	values []int64
	// stat is the metrics.Statistic tested ("run value", "run median",
	// "run mean"), or "pooled samples" on the fallback.
	stat string
	unit string
}

// testedSample returns the values compare and gate test for metric name
// of m: its per-run values (metrics.Def.Tested). A metric with several
// samples per run is tested on m.PerRun; a file without them falls back
// to the pooled samples, with unit UnitSample (the caller warns).
func testedSample(name string, m results.Metric) tested {
	stat := metrics.TestedOn(name)
	if stat == metrics.RunValue {
		return tested{values: m.Values, stat: string(stat), unit: UnitRun}
	}
	if m.PerRunStat != "" {
		return tested{values: m.PerRun, stat: m.PerRunStat, unit: UnitRun}
	}
	if m.Count == 0 {
		return tested{values: nil, stat: string(stat), unit: UnitRun}
	}
	return tested{values: m.Values, stat: "pooled samples", unit: UnitSample}
}

// pooledSides collects, per side ("base", "head", "null"), the metrics
// tested on pooled samples (a file without per-run aggregates).
type pooledSides map[string][]string

// add notes metric on side when t is the pooled fallback.
func (p pooledSides) add(side, metric string, t tested) {
	if t.unit == UnitSample && !slices.Contains(p[side], metric) {
		p[side] = append(p[side], metric)
	}
}

// warnings are one pooledWarning per side with such metrics.
func (p pooledSides) warnings() []string {
	var w []string
	for _, side := range []string{"base", "head", "null"} {
		if len(p[side]) > 0 {
			w = append(w, pooledWarning(side, strings.Join(p[side], ", ")))
		}
	}
	return w
}

// pooledWarning is the warning of a side whose file has no per-run
// aggregates for metric.
func pooledWarning(side, metric string) string {
	return fmt.Sprintf("%s has no per-run aggregates for %s (a results file from an older durabench): it is tested on pooled samples, which overstates significance; re-run that sweep", side, metric)
}

// Verdicts of a comparison row (MetricRow.Verdict).
const (
	// VerdictSame: the test finds no significant difference.
	VerdictSame = "same"
	// VerdictNoise: significant, but no larger than the null sweep's Δ
	// (the change an A/A pair of the baseline shows).
	VerdictNoise = "within null"
	// VerdictWorse and VerdictBetter: a significant change beyond the null
	// Δ (when there is a null sweep) of a metric whose lower is better
	// (metrics.Lower), so up is worse.
	VerdictWorse  = "worse"
	VerdictBetter = "better"
	// VerdictChanged: such a change of an informational metric
	// (metrics.Informational), which can fall when the engine only got
	// slower: never called better or worse.
	VerdictChanged = "changed"
	// VerdictNone: one side lacks the metric or its values.
	VerdictNone = "not compared"
)

// beyondNull reports whether a change of deltaPct clears the null sweep's
// change nullPct: it is larger in magnitude. A NaN null (no null sweep, or
// the null lacks the cell) is cleared by any change.
func beyondNull(deltaPct, nullPct float64) bool {
	if math.IsNaN(nullPct) {
		return true
	}
	return math.Abs(deltaPct) > math.Abs(nullPct)
}
