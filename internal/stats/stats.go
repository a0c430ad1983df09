// Package stats compares sweeps read from results files: the statistics of a
// sample of per-run values (median with its confidence interval, Mann-Whitney
// U tests, geometric means, as benchstat computes them), the A/B comparison
// of two files cell by cell (Compare), the gate that turns rules into a
// verdict (Gate), and their text and markdown renderings.
package stats

import (
	"math"

	moremath "github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// Alpha is the significance level of every test in compare and gate: a
// difference counts only when the Mann-Whitney U test's p-value is below it.
const Alpha = 0.05

// Confidence is the level of the confidence intervals compare reports.
const Confidence = 0.95

// Summary is the median of a sample of per-run values with its confidence
// interval, all in the metric's unit (microseconds).
type Summary struct {
	N      int
	Median float64
	// Lo and Hi bound the confidence interval around Median; they are
	// infinite when the sample is too small for one (fewer than 6 values
	// at 95%).
	Lo, Hi float64
	// Warnings explain a degenerate summary (e.g. too few values).
	Warnings []string
}

// Summarize returns the median of values and its confidence interval at the
// given confidence level (0.95 for 95%), as benchstat computes them
// (benchmath.AssumeNothing: no distributional assumption). values is not
// modified.
func Summarize(values []int64, confidence float64) Summary {
	if len(values) == 0 {
		return Summary{Median: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Warnings: []string{"no values"}}
	}
	s := benchmath.NewSample(floats(values), &benchmath.DefaultThresholds)
	sum := benchmath.AssumeNothing.Summary(s, confidence)
	return Summary{N: len(values), Median: sum.Center, Lo: sum.Lo, Hi: sum.Hi, Warnings: errStrings(sum.Warnings)}
}

// RangePct is the half-width of the confidence interval as a percentage of
// the median, the "± x%" benchstat prints; ok is false when there is no
// finite interval.
func (s Summary) RangePct() (pct float64, ok bool) {
	if s.N == 0 || math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) || math.IsNaN(s.Lo) {
		return 0, false
	}
	if s.Median == 0 {
		return 0, s.Lo == 0 && s.Hi == 0
	}
	return 100 * math.Max(s.Hi/s.Median-1, 1-s.Lo/s.Median), true
}

// Significance is the outcome of a Mann-Whitney U test between a base and a
// head sample.
type Significance struct {
	// P is the two-sided p-value of the hypothesis that both samples come
	// from the same distribution; 1 when the test cannot run (an empty
	// sample, or every value equal).
	P      float64
	Alpha  float64
	N1, N2 int
	// Significant is P < Alpha: the location of the distributions differs.
	Significant bool
	// Warnings explain a weak test (e.g. too few values to ever reach
	// Alpha).
	Warnings []string
}

// MannWhitney tests whether base and head per-run values come from the same
// distribution with the Mann-Whitney U test (benchmath.AssumeNothing) at
// the given alpha. Neither slice is modified.
func MannWhitney(base, head []int64, alpha float64) Significance {
	if len(base) == 0 || len(head) == 0 {
		return Significance{P: 1, Alpha: alpha, N1: len(base), N2: len(head), Warnings: []string{"no values to compare"}}
	}
	th := benchmath.Thresholds{CompareAlpha: alpha}
	s1 := benchmath.NewSample(floats(base), &th)
	s2 := benchmath.NewSample(floats(head), &th)
	c := benchmath.AssumeNothing.Compare(s1, s2)
	return Significance{
		P: c.P, Alpha: alpha, N1: c.N1, N2: c.N2,
		Significant: c.P < alpha,
		Warnings:    errStrings(c.Warnings),
	}
}

// MannWhitneyBeyond tests whether head lies beyond ratio × base: with above
// set, the one-sided alternative is that head tends to be larger than the
// base values scaled by ratio, else smaller. It is the gate's test of a
// relative rule such as "p90 < 1.10x baseline": a head sample only
// significantly above 1.10 × the baseline fails it, so noise around the
// threshold does not. Neither slice is modified.
func MannWhitneyBeyond(base, head []int64, ratio float64, above bool, alpha float64) Significance {
	sig := Significance{P: 1, Alpha: alpha, N1: len(base), N2: len(head)}
	if len(base) == 0 || len(head) == 0 {
		sig.Warnings = []string{"no values to compare"}
		return sig
	}
	scaled := floats(base)
	for i := range scaled {
		scaled[i] *= ratio
	}
	alt := moremath.LocationGreater
	if !above {
		alt = moremath.LocationLess
	}
	res, err := moremath.MannWhitneyUTest(floats(head), scaled, alt)
	if err != nil {
		// Every value equal: nothing lies beyond anything.
		return sig
	}
	sig.P = res.P
	sig.Significant = res.P < alpha
	// One-sided, the smallest p-value with n values a side is 1/C(2n, n):
	// below 4 a side it never reaches 0.05.
	if !sig.Significant && len(base) < 4 && len(head) < 4 {
		sig.Warnings = append(sig.Warnings, "need >= 4 values a side to detect a change at alpha 0.05")
	}
	return sig
}

// Geomean returns the geometric mean of xs, which must all be > 0; NaN when
// xs is empty.
func Geomean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

// deltaPct is the change from base to head in percent; NaN when base is 0
// and head is not.
func deltaPct(base, head float64) float64 {
	if base == head {
		return 0
	}
	if base == 0 {
		return math.NaN()
	}
	return (head/base - 1) * 100
}

// floats copies int64 values into a new float64 slice (benchmath sorts
// its input in place, and per-run values must stay in run order).
func floats(values []int64) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = float64(v)
	}
	return out
}

func errStrings(errs []error) []string {
	if len(errs) == 0 {
		return nil
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}
