package stats

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	moremath "github.com/aclements/go-moremath/stats"
)

// Power is the power the minimum detectable effect is computed for: the
// change a test at Alpha finds in 80% of sweeps.
const Power = 0.8

// exactSignedRankMax is the largest number of pairs whose signed-rank
// p-value is computed exactly (R's wilcox.test: exact below 50 pairs
// without ties or zeros); larger samples, and samples with ties or
// zeros, use the normal approximation with R's tie and continuity
// corrections.
const exactSignedRankMax = 49

// criticalExactMax is the largest number of pairs whose confidence
// interval takes its order statistics from the exact signed-rank
// distribution; above it, from the normal approximation.
const criticalExactMax = 400

// LogRatio is ln(b/a) of two per-run values in µs, each taken as at
// least 1 µs (a value clamped to 0 would make the ratio infinite).
func LogRatio(a, b int64) float64 {
	return math.Log(float64(max(b, 1))) - math.Log(float64(max(a, 1)))
}

// Paired is a paired comparison: per block of an interleaved sweep, the
// log ratio d = ln(head/base) of the two runs' values (the head is side
// B, the base side A), tested with the Wilcoxon signed-rank test, with the
// Hodges–Lehmann estimate of the ratio and its confidence interval (the
// interval that inverts the same test) and the minimum detectable effect.
type Paired struct {
	// N is the number of pairs (blocks where both runs have a value).
	N int
	// Ratio is exp of the Hodges–Lehmann estimate (the median of the
	// Walsh averages of d): the typical head/base ratio. Lo and Hi bound
	// its confidence interval (NaN when N < 2). Achieved is that
	// interval's actual coverage (the signed-rank distribution is
	// discrete: at 6 pairs the closest to 95% is 96.9%).
	Ratio, Lo, Hi, Achieved float64
	// P is the two-sided signed-rank p-value; Exact says whether it is
	// the exact distribution's (no ties or zeros, N < 50) or the normal
	// approximation's.
	P     float64
	Exact bool
	// SD is the standard deviation of d; MDEPct the minimum detectable
	// effect in percent (see MDEPaired).
	SD, MDEPct float64
	// Significant is P < alpha.
	Significant bool
	// Rounds is the number of rounds the blocks ran in when the test is
	// across them (PairedRounds); 0: the test is over the blocks.
	Rounds   int
	Warnings []string
}

// DeltaPct is the estimated change in percent, (Ratio − 1) × 100.
func (p Paired) DeltaPct() float64 { return (p.Ratio - 1) * 100 }

// CIPct is the confidence interval of the change in percent.
func (p Paired) CIPct() (lo, hi float64) { return (p.Lo - 1) * 100, (p.Hi - 1) * 100 }

// Coverage names the interval's coverage where it is below the 1 − alpha
// it is reported as: " 93.8% CI" — else "". The signed-rank
// distribution is discrete, and below 6 pairs its widest interval (the
// smallest Walsh average to the largest) covers less than 95%: such an
// interval can leave out 0 while the test finds no change ("~ (-18%
// [-36, -3])" at 5 pairs), which reads as a contradiction unless the
// interval says what it is.
func (p Paired) Coverage(alpha float64) string {
	if math.IsNaN(p.Achieved) || p.Achieved >= 1-alpha-1e-9 {
		return ""
	}
	return fmt.Sprintf(" %.1f%% CI", 100*p.Achieved)
}

// HalfWidthPct is half the confidence interval's width on the log scale,
// as a percentage: 100 × (exp((ln Hi − ln Lo)/2) − 1). A precision target
// ("--precision 2%") is met when it is at most the target; +Inf without
// an interval.
func (p Paired) HalfWidthPct() float64 {
	if !(p.Lo > 0) || !(p.Hi > 0) || math.IsInf(p.Hi, 0) {
		return math.Inf(1)
	}
	return 100 * (math.Exp((math.Log(p.Hi)-math.Log(p.Lo))/2) - 1)
}

// PairedTest compares paired per-run values: base[i] and head[i] are the
// two runs of block i. alpha is the test's level and 1 − alpha the
// interval's confidence.
func PairedTest(base, head []int64, alpha float64) Paired {
	d := make([]float64, 0, len(base))
	for i := range min(len(base), len(head)) {
		d = append(d, LogRatio(base[i], head[i]))
	}
	return PairedLog(d, alpha)
}

// PairedLog is PairedTest on the log ratios d themselves.
func PairedLog(d []float64, alpha float64) Paired {
	p := Paired{N: len(d), Ratio: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Achieved: math.NaN(),
		P: 1, SD: math.NaN(), MDEPct: math.NaN()}
	if len(d) == 0 {
		p.Warnings = []string{"no pairs"}
		return p
	}
	est, lo, hi, achieved := HodgesLehmann(d, 1-alpha)
	p.Ratio, p.Lo, p.Hi, p.Achieved = math.Exp(est), math.Exp(lo), math.Exp(hi), achieved
	p.P, p.Exact = SignedRank(d)
	p.Significant = p.P < alpha
	if len(d) >= 2 {
		p.SD = sd(d)
		p.MDEPct = mdePaired(p.SD, len(d), alpha, 2)
	}
	// Two-sided, the smallest exact p-value with n pairs is 2/2^n: below
	// 6 pairs it never reaches 0.05.
	if len(d) < 6 && !p.Significant {
		p.Warnings = append(p.Warnings, "need >= 6 pairs to detect a change at alpha 0.05")
	}
	return p
}

// signedRanks returns the ranks of |d| over the non-zero d (average
// ranks for ties), their signs, and the tie correction Σ(t³ − t) over
// the groups of tied |d|.
func signedRanks(d []float64) (ranks []float64, positive []bool, ties float64) {
	type v struct {
		abs float64
		pos bool
	}
	var xs []v
	for _, x := range d {
		if x != 0 {
			xs = append(xs, v{math.Abs(x), x > 0})
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].abs < xs[j].abs })
	ranks = make([]float64, len(xs))
	positive = make([]bool, len(xs))
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1].abs == xs[i].abs {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			ranks[k], positive[k] = r, xs[k].pos
		}
		if t := float64(j - i + 1); t > 1 {
			ties += t*t*t - t
		}
		i = j + 1
	}
	return ranks, positive, ties
}

// SignedRank is the two-sided Wilcoxon signed-rank test of the
// hypothesis that d is symmetric about 0, computed as R's wilcox.test
// (paired, correct = TRUE): zeros dropped; the exact distribution when
// fewer than 50 values remain and no |d| ties, else the normal
// approximation with the tie and continuity corrections. It returns the
// p-value (1 when no d is non-zero) and whether it is exact.
func SignedRank(d []float64) (p float64, exact bool) {
	ranks, pos, ties := signedRanks(d)
	n := len(ranks)
	if n == 0 {
		return 1, false
	}
	var v float64
	for i, r := range ranks {
		if pos[i] {
			v += r
		}
	}
	nf := float64(n)
	if n <= exactSignedRankMax && ties == 0 && len(d) == n {
		dist := signedRankDist(n)
		q := int(v)
		var tail float64
		if v > nf*(nf+1)/4 {
			tail = 1 - dist.cdf(q-1) // P(V >= v)
		} else {
			tail = dist.cdf(q) // P(V <= v)
		}
		return min(2*tail, 1), true
	}
	z := v - nf*(nf+1)/4
	sigma := math.Sqrt(nf*(nf+1)*(2*nf+1)/24 - ties/48)
	if sigma == 0 {
		return 1, false
	}
	corr := 0.0
	if z > 0 {
		corr = 0.5
	} else if z < 0 {
		corr = -0.5
	}
	z = (z - corr) / sigma
	norm := moremath.NormalDist{Mu: 0, Sigma: 1}
	return min(2*min(norm.CDF(z), 1-norm.CDF(z)), 1), false
}

// SignedRankGreater is the one-sided signed-rank test that d tends to be
// above 0 (R's alternative = "greater"), with SignedRank's choice of the
// exact or the normal distribution.
func SignedRankGreater(d []float64) float64 {
	ranks, pos, ties := signedRanks(d)
	n := len(ranks)
	if n == 0 {
		return 1
	}
	var v float64
	for i, r := range ranks {
		if pos[i] {
			v += r
		}
	}
	nf := float64(n)
	if n <= exactSignedRankMax && ties == 0 && len(d) == n {
		return 1 - signedRankDist(n).cdf(int(v)-1)
	}
	sigma := math.Sqrt(nf*(nf+1)*(2*nf+1)/24 - ties/48)
	if sigma == 0 {
		return 1
	}
	z := (v - nf*(nf+1)/4 - 0.5) / sigma
	return 1 - moremath.NormalDist{Mu: 0, Sigma: 1}.CDF(z)
}

// HodgesLehmann returns the Hodges–Lehmann estimate of d's center (the
// median of its n(n+1)/2 Walsh averages (d_i + d_j)/2, i ≤ j) and its
// confidence interval at the given level, as R's wilcox.test(conf.int =
// TRUE) computes it in the exact case: the Walsh averages of ranks qu and
// n(n+1)/2 − qu + 1, where qu is the signed-rank distribution's
// (1 − conf)/2 quantile (at least 1). achieved is the interval's actual
// coverage. Above criticalExactMax values qu comes from the normal
// approximation. With one value, the interval is that value's (a point).
func HodgesLehmann(d []float64, conf float64) (est, lo, hi, achieved float64) {
	n := len(d)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	w := make([]float64, 0, n*(n+1)/2)
	for i := range n {
		for j := i; j < n; j++ {
			w = append(w, (d[i]+d[j])/2)
		}
	}
	slices.Sort(w)
	m := len(w)
	if m%2 == 1 {
		est = w[m/2]
	} else {
		est = (w[m/2-1] + w[m/2]) / 2
	}
	a := (1 - conf) / 2
	var qu int
	if n <= criticalExactMax {
		dist := signedRankDist(n)
		qu = dist.quantile(a)
		achieved = 1 - 2*dist.cdf(max(qu, 1)-1)
	} else {
		nf := float64(n)
		z := moremath.NormalDist{Mu: 0, Sigma: 1}.InvCDF(1 - a)
		qu = int(math.Floor(nf*(nf+1)/4 - z*math.Sqrt(nf*(nf+1)*(2*nf+1)/24)))
		achieved = conf
	}
	qu = max(qu, 1)
	ql := m - qu // 1-based rank of the upper bound is ql+1
	return est, w[qu-1], w[ql], achieved
}

// signedRank is the null distribution of the signed-rank statistic V for
// n values: p[v] = P(V = v), v = 0 … n(n+1)/2.
type signedRank struct{ p []float64 }

var (
	signedRankMu    sync.Mutex
	signedRankCache = map[int]*signedRank{}
)

// signedRankDist returns the distribution for n (computed once per n).
func signedRankDist(n int) *signedRank {
	signedRankMu.Lock()
	defer signedRankMu.Unlock()
	if d, ok := signedRankCache[n]; ok {
		return d
	}
	top := n * (n + 1) / 2
	p := make([]float64, top+1)
	p[0] = 1
	hi := 0
	for k := 1; k <= n; k++ {
		// Each rank k is in V with probability 1/2.
		hi += k
		for v := hi; v >= 0; v-- {
			x := p[v] / 2
			if v >= k {
				x += p[v-k] / 2
			}
			p[v] = x
		}
	}
	d := &signedRank{p: p}
	signedRankCache[n] = d
	return d
}

// cdf is P(V <= q).
func (s *signedRank) cdf(q int) float64 {
	if q < 0 {
		return 0
	}
	var c float64
	for v := 0; v <= q && v < len(s.p); v++ {
		c += s.p[v]
	}
	return min(c, 1)
}

// quantile is R's qsignrank: the smallest q with P(V <= q) >= a.
func (s *signedRank) quantile(a float64) int {
	var c float64
	for v, x := range s.p {
		c += x
		// R compares with a small fuzz so that rounding in the sum does
		// not move the quantile past an exact boundary.
		if c >= a*(1-64*2.220446e-16) {
			return v
		}
	}
	return len(s.p) - 1
}

// MDEPaired is the minimum detectable effect in percent of a paired test
// at level alpha with power Power, from the standard deviation sd of n
// log ratios: exp((t₁₋α/₂ + t_power) · sd/√n) − 1, the t quantiles with
// n − 1 degrees of freedom (the normal z₀.₉₇₅ + z₀.₈ = 2.80 understates it
// by 12% at 10 pairs). It is the t-test's: the signed-rank test is about
// as powerful on normal log ratios (95%) and more on heavy-tailed ones,
// where sd overstates the spread, so the figure errs large. NaN below 2
// pairs.
func MDEPaired(sd float64, n int, alpha float64) float64 {
	if n < 2 || math.IsNaN(sd) {
		return math.NaN()
	}
	t := tSum(float64(n-1), alpha)
	return 100 * (math.Exp(t*sd/math.Sqrt(float64(n))) - 1)
}

// MDETwoSample is the minimum detectable effect in percent of a
// two-sample comparison (two sweeps, not paired) at level alpha with
// power Power, from the standard deviations of each sample's log values:
// exp((t₁₋α/₂ + t_power) · √(s₁²/n₁ + s₂²/n₂)) − 1, with n₁ + n₂ − 2
// degrees of freedom. NaN when a side has fewer than 2 values.
func MDETwoSample(sd1 float64, n1 int, sd2 float64, n2 int, alpha float64) float64 {
	if n1 < 2 || n2 < 2 || math.IsNaN(sd1) || math.IsNaN(sd2) {
		return math.NaN()
	}
	se := math.Sqrt(sd1*sd1/float64(n1) + sd2*sd2/float64(n2))
	return 100 * (math.Exp(tSum(float64(n1+n2-2), alpha)*se) - 1)
}

// MDEOf is MDETwoSample of two samples of per-run values (µs, each taken
// as at least 1 µs), for the two-sided Mann-Whitney test: +Inf when that
// test can never reach alpha with samples of these sizes (MannWhitneyFloor).
func MDEOf(base, head []int64, alpha float64) float64 {
	return mdeOf(base, head, alpha, 2)
}

// mdePaired is MDEPaired for a signed-rank test of sides sides (1 or 2):
// +Inf when that test can never reach alpha with n pairs
// (SignedRankFloor).
func mdePaired(sd float64, n int, alpha float64, sides int) float64 {
	m := MDEPaired(sd, n, alpha)
	if !math.IsNaN(m) && SignedRankFloor(n, sides) >= alpha {
		return math.Inf(1)
	}
	return m
}

// mdeOf is MDEOf for a Mann-Whitney test of sides sides (1 or 2).
func mdeOf(base, head []int64, alpha float64, sides int) float64 {
	m := MDETwoSample(sd(logs(base)), len(base), sd(logs(head)), len(head), alpha)
	if !math.IsNaN(m) && MannWhitneyFloor(len(base), len(head), sides) >= alpha {
		return math.Inf(1)
	}
	return m
}

// A rank test cannot give every p-value: with few values its smallest is
// far above α, and then no effect, however large, is ever found — the
// t-based MDE formulas above would still print a finite one (3 runs a
// side with a tight spread: "MDE 5%"), a claim the test cannot keep. The
// floors below are each test's smallest p-value without ties (ties only
// raise it); an MDE is +Inf where the floor is not below α.

// MannWhitneyFloor is the smallest p-value of a Mann-Whitney test of
// sides sides (1 or 2) with n1 and n2 values: sides / C(n1+n2, n1), the
// samples entirely apart. Two-sided it is 0.1 at 3+3, 0.057 at 3+4 and
// 0.029 at 4+4.
func MannWhitneyFloor(n1, n2, sides int) float64 {
	if n1 < 1 || n2 < 1 {
		return 1
	}
	// C(n1+n2, k) by products, exact in float64 as far as it matters
	// (up to 2⁵³; the floor is long past α there).
	k := min(n1, n2)
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n1+n2-k+i) / float64(i)
	}
	return min(1, float64(sides)/c)
}

// SignedRankFloor is the smallest p-value of a signed-rank test of sides
// sides (1 or 2) with n pairs: sides / 2ⁿ, every log ratio of one sign.
// Two-sided it is 0.0625 at 5 pairs and 0.031 at 6.
func SignedRankFloor(n, sides int) float64 {
	if n < 1 {
		return 1
	}
	return min(1, float64(sides)*math.Exp2(-float64(n)))
}

// tSum is t₁₋α/₂ + t_Power with df degrees of freedom.
func tSum(df, alpha float64) float64 {
	inv := moremath.InvCDF(moremath.TDist{V: df})
	return inv(1-alpha/2) + inv(Power)
}

func logs(vs []int64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.Log(float64(max(v, 1)))
	}
	return out
}

// sd is the sample standard deviation (n − 1); NaN below 2 values.
func sd(xs []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// SpreadHalfWidthPct is the half-width, in percent, of a confidence
// interval for the center of log ratios d estimated from their spread
// about zero alone: 100 × (exp(t₁₋α/₂ · rms(d)/√n) − 1), rms(d) = √(Σd²/n),
// with n − 1 degrees of freedom; +Inf below 2 values. It is the precision
// rule's width (sweep --precision): a function of the |d| alone, so the
// moment a sweep stops says nothing about the signs of its log ratios.
// Under the null hypothesis (A and B exchangeable, each d as likely
// negative as positive) the signs stay fair coins whatever the stopping
// time, and the signed-rank test keeps its level. Near zero it is the
// t-interval's half-width; away from zero it is wider (rms² = sd² + mean²),
// so the rule errs towards more blocks.
func SpreadHalfWidthPct(d []float64, alpha float64) float64 {
	n := len(d)
	if n < 2 {
		return math.Inf(1)
	}
	var ss float64
	for _, x := range d {
		ss += x * x
	}
	rms := math.Sqrt(ss / float64(n))
	t := moremath.InvCDF(moremath.TDist{V: float64(n - 1)})(1 - alpha/2)
	return 100 * (math.Exp(t*rms/math.Sqrt(float64(n))) - 1)
}

// PairedRounds is the paired comparison of an interleaved pair whose
// blocks ran in rounds, each round on fresh processes of both sides
// (sweep --rounds): round[i] is block i's round. A draw of the
// environment that lasts a process — its memory layout, its compiled
// code, its world's directory — is shared by every block of a round, so
// the blocks are not independent and a test over them counts one draw
// many times (a target's A/A, two processes for a whole sweep: 17% of the
// paired tests significant). Each round's estimate is the Hodges–Lehmann
// estimate of its blocks' log ratios; the estimates are tested with
// Student's t, R − 1 degrees of freedom, and the interval and the MDE are
// that test's. Fewer than two rounds: PairedLog over the blocks.
func PairedRounds(d []float64, round []int, alpha float64) Paired {
	est := roundEstimates(d, round)
	if len(est) < 2 {
		return PairedLog(d, alpha)
	}
	p := Paired{N: len(d), Rounds: len(est), Achieved: 1 - alpha}
	mean, s := 0.0, sd(est)
	for _, e := range est {
		mean += e
	}
	mean /= float64(len(est))
	df := float64(len(est) - 1)
	se := s / math.Sqrt(float64(len(est)))
	dist := moremath.TDist{V: df}
	half := moremath.InvCDF(dist)(1-alpha/2) * se
	p.Ratio, p.Lo, p.Hi = math.Exp(mean), math.Exp(mean-half), math.Exp(mean+half)
	switch {
	case se > 0:
		p.P = 2 * (1 - dist.CDF(math.Abs(mean)/se))
	case mean == 0:
		p.P = 1
	default:
		p.P = 0
	}
	p.Exact = true
	p.Significant = p.P < alpha
	p.SD = s
	p.MDEPct = MDEPaired(s, len(est), alpha)
	if len(est) < 4 && !p.Significant {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d rounds: a t-test with %d degrees of freedom resolves only large changes", len(est), len(est)-1))
	}
	return p
}

// PairedRoundsBeyond is PairedRounds' one-sided test that the rounds'
// estimates lie above 0 (a gate's relative rule shifts them by its
// threshold first): its p-value and the number of rounds.
func PairedRoundsBeyond(d []float64, round []int) (p float64, rounds int) {
	est := roundEstimates(d, round)
	if len(est) < 2 {
		return SignedRankGreater(d), 0
	}
	mean, s := 0.0, sd(est)
	for _, e := range est {
		mean += e
	}
	mean /= float64(len(est))
	se := s / math.Sqrt(float64(len(est)))
	if se == 0 {
		if mean > 0 {
			return 0, len(est)
		}
		return 1, len(est)
	}
	return 1 - moremath.TDist{V: float64(len(est) - 1)}.CDF(mean/se), len(est)
}

// roundEstimates are the Hodges–Lehmann estimates of d by round, in
// round order (a round of no block is absent).
func roundEstimates(d []float64, round []int) []float64 {
	by := map[int][]float64{}
	var ids []int
	for i, x := range d {
		r := round[i]
		if _, ok := by[r]; !ok {
			ids = append(ids, r)
		}
		by[r] = append(by[r], x)
	}
	slices.Sort(ids)
	out := make([]float64, 0, len(ids))
	for _, r := range ids {
		est, _, _, _ := HodgesLehmann(by[r], 0.95)
		out = append(out, est)
	}
	return out
}
