package stats

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// synthMetric builds a results.Metric from per-run values (µs) as
// results.NewMetric does, without the HDR encoding: compare and gate never
// read it, and encoding hundreds of histograms dominates the test time under
// -race.
func synthMetric(values []int64) results.Metric {
	m := results.Metric{Unit: string(metrics.Microseconds), Count: len(values), Values: slices.Clone(values)}
	if len(values) == 0 {
		return m
	}
	sorted := slices.Sorted(slices.Values(values))
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	m.Min, m.Max, m.Mean = sorted[0], sorted[len(sorted)-1], sum/float64(len(sorted))
	m.P50, m.P75 = metrics.Quantile(sorted, 50), metrics.Quantile(sorted, 75)
	m.P90, m.P99 = metrics.Quantile(sorted, 90), metrics.Quantile(sorted, 99)
	return m
}

func TestSynthMetricIsNewMetric(t *testing.T) {
	vals := []int64{5, 1, 9, 3, 7, 2, 8}
	want := results.NewMetric(vals, 0)
	want.HDR = ""
	if got := synthMetric(vals); !reflect.DeepEqual(got, want) {
		t.Errorf("synthMetric = %+v\nNewMetric   = %+v", got, want)
	}
}

// lognormal draws n values around median (µs) with log-space spread sigma,
// scaled by factor: the shape of real latency samples.
func lognormal(rng *rand.Rand, n int, median, sigma, factor float64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(math.Round(factor * median * math.Exp(sigma*rng.NormFloat64())))
	}
	return out
}

func TestSummarize(t *testing.T) {
	vals := []int64{50, 10, 40, 20, 30, 60, 70, 80, 90, 100}
	orig := slices.Clone(vals)
	s := Summarize(vals, Confidence)
	if s.N != 10 || s.Median != 55 {
		t.Fatalf("Summarize = %+v, want N=10 median=55", s)
	}
	if !(s.Lo <= 55 && s.Hi >= 55) || math.IsInf(s.Lo, 0) {
		t.Errorf("CI = [%v, %v], want a finite interval around 55", s.Lo, s.Hi)
	}
	if !slices.Equal(vals, orig) {
		t.Errorf("Summarize reordered its input: %v", vals)
	}
	if s := Summarize([]int64{5, 6}, Confidence); !math.IsInf(s.Hi, 1) || len(s.Warnings) == 0 {
		t.Errorf("two values: %+v, want an infinite interval with a warning", s)
	}
	if s := Summarize(nil, Confidence); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("no values: %+v", s)
	}
}

func TestMannWhitney(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := lognormal(rng, 30, 10000, 0.05, 1)
	if got := MannWhitney(a, a, Alpha); got.Significant || got.P < 0.9 {
		t.Errorf("identical samples: %+v, want p≈1, not significant", got)
	}
	b := lognormal(rng, 30, 10000, 0.05, 1.2)
	if got := MannWhitney(a, b, Alpha); !got.Significant || got.P > 0.001 {
		t.Errorf("+20%% shift: %+v, want significant", got)
	}
	same := []int64{7, 7, 7, 7, 7}
	if got := MannWhitney(same, same, Alpha); got.Significant || got.P != 1 {
		t.Errorf("all-equal samples: %+v, want p=1", got)
	}
	if got := MannWhitney([]int64{1, 2, 3}, []int64{10, 20, 30}, Alpha); got.Significant || len(got.Warnings) == 0 {
		t.Errorf("n=3: %+v, want not significant with a too-few-samples warning", got)
	}
	if got := MannWhitney(nil, a, Alpha); got.Significant || got.P != 1 {
		t.Errorf("empty base: %+v", got)
	}
}
