package stats

import (
	"fmt"
	"math"
	"slices"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// FastFactor sets the fast-mode threshold of a bimodal metric: a run is in
// the fast mode when its value is under FastFactor × the fastest run of
// either side of the comparison.
const FastFactor = 2

// FastShareStatistic names the fast-mode share where compare's JSON and
// the gate's checks print it.
var FastShareStatistic = fmt.Sprintf("fast-mode share (runs under %d × the fastest run)", FastFactor)

// ShareRow compares the share of a bimodal metric's runs in the fast mode
// (metrics.Bimodal; TTFS) between base and head, as a proportion: the runs
// of a cell are independent, so Fisher's exact test applies.
type ShareRow struct {
	Cell CellKey
	// ThresholdUS is the fast-mode bound: FastFactor × the fastest run of
	// either side (µs).
	ThresholdUS float64
	// BaseFast of BaseN runs, HeadFast of HeadN runs, were under it.
	BaseFast, BaseN, HeadFast, HeadN int
	// DeltaPP is the change of the share in percentage points.
	DeltaPP float64
	// P is the two-sided p-value of Fisher's exact test.
	P           float64
	Significant bool
}

// shareRow compares the fast-mode share of one cell's metric; ok is false
// when a side has no values.
func shareRow(k CellKey, base, head []int64, alpha float64) (ShareRow, bool) {
	if len(base) == 0 || len(head) == 0 {
		return ShareRow{}, false
	}
	r := ShareRow{Cell: k, ThresholdUS: fastThreshold(min(slices.Min(base), slices.Min(head))), BaseN: len(base), HeadN: len(head)}
	r.BaseFast, r.HeadFast = fastCount(base, r.ThresholdUS), fastCount(head, r.ThresholdUS)
	r.DeltaPP = 100 * (float64(r.HeadFast)/float64(r.HeadN) - float64(r.BaseFast)/float64(r.BaseN))
	r.P = FisherExact(r.BaseFast, r.BaseN-r.BaseFast, r.HeadFast, r.HeadN-r.HeadFast)
	r.Significant = r.P < alpha
	return r, true
}

// fastThreshold is the fast-mode bound (µs) given the fastest run of
// either side: FastFactor × it, at least FastFactor µs.
func fastThreshold(fastest int64) float64 { return FastFactor * math.Max(float64(fastest), 1) }

// fastCount is how many of values are in the fast mode: under threshold.
func fastCount(values []int64, threshold float64) int {
	n := 0
	for _, v := range values {
		if float64(v) < threshold {
			n++
		}
	}
	return n
}

// shareRows are the fast-mode rows of metric name over the cells of both
// sides, or nil when the metric is not bimodal.
func shareRows(name string, keys []CellKey, bIdx, hIdx map[CellKey]*results.Cell, alpha float64) []ShareRow {
	if !metrics.Bimodal(name) {
		return nil
	}
	var out []ShareRow
	for _, k := range keys {
		b, h := metricOf(bIdx[k], name), metricOf(hIdx[k], name)
		if b == nil || h == nil {
			continue
		}
		if r, ok := shareRow(k, b.Values, h.Values, alpha); ok {
			out = append(out, r)
		}
	}
	return out
}

// FisherExact is the two-sided p-value of Fisher's exact test of the 2×2
// table [[a, b], [c, d]] (rows: base, head; columns: fast, slow): the
// probability, with the margins fixed, of a table at most as likely as
// this one.
func FisherExact(a, b, c, d int) float64 {
	n := a + b + c + d
	row1, col1 := a+b, a+c
	if n == 0 {
		return 1
	}
	lf := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	logP := func(x int) float64 {
		return lf(row1) + lf(n-row1) + lf(col1) + lf(n-col1) - lf(n) - lf(x) - lf(row1-x) - lf(col1-x) - lf(n-row1-col1+x)
	}
	obs := logP(a)
	var p float64
	for x := max(0, row1+col1-n); x <= min(row1, col1); x++ {
		if lp := logP(x); lp <= obs+1e-7 {
			p += math.Exp(lp)
		}
	}
	return math.Min(p, 1)
}
