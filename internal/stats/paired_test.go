package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) != math.IsNaN(want) {
		t.Errorf("%s = %.6g, want %.6g (±%g)", what, got, want, tol)
	}
}

// The depression-scale data of R's ?wilcox.test (Hollander & Wolfe 1973,
// p. 29): x − y for 9 patients. R prints V = 40, p-value = 0.03906
// (exact), and with alternative = "greater" 0.01953. By hand: the ranks
// of |d| put the two negative differences at ranks 2 and 3, so V = 45 − 5
// = 40; P(V ≥ 40) is the subsets of {1..9} summing to 5 or less, 10 of
// 2⁹ = 0.01953. The interval: qsignrank(0.025, 9) = 6 (P(V ≤ 5) = 10/512
// < 0.025 ≤ P(V ≤ 6) = 14/512), so the bounds are the 6th smallest and
// the 6th largest of the 45 Walsh averages: 0.01 (d = 0.01 itself) and
// 0.786 ((0.62 + 0.952)/2); the estimate is their median, the 23rd.
func TestSignedRankKnownValues(t *testing.T) {
	x := []float64{1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30}
	y := []float64{0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29}
	d := make([]float64, len(x))
	for i := range x {
		d[i] = x[i] - y[i]
	}
	p, exact := SignedRank(d)
	if !exact {
		t.Error("9 values without ties: want the exact distribution")
	}
	near(t, "p", p, 20.0/512, 1e-12)
	near(t, "p greater", SignedRankGreater(d), 10.0/512, 1e-12)
	est, lo, hi, achieved := HodgesLehmann(d, 0.95)
	near(t, "lo", lo, 0.01, 1e-9)
	near(t, "hi", hi, 0.786, 1e-9)
	near(t, "achieved", achieved, 1-2*10.0/512, 1e-12)
	near(t, "estimate", est, 0.46, 1e-9)
}

// Six values, by hand: d = -1, 2, 3, 5, 8, 13. V = 2+3+4+5+6 = 20 of 21;
// P(V ≥ 20) = 2/64, two-sided 0.0625. qsignrank(0.025, 6) = 1 (P(V ≤ 0)
// = 1/64 < 0.025 ≤ P(V ≤ 1) = 2/64), so the interval is the smallest
// and largest Walsh averages, -1 and 13, at 1 − 2/64 = 96.9%; the 21
// Walsh averages' median is 5.
func TestHodgesLehmannSmall(t *testing.T) {
	d := []float64{-1, 2, 3, 5, 8, 13}
	p, exact := SignedRank(d)
	if !exact {
		t.Error("want exact")
	}
	near(t, "p", p, 0.0625, 1e-12)
	est, lo, hi, achieved := HodgesLehmann(d, 0.95)
	near(t, "estimate", est, 5, 0)
	near(t, "lo", lo, -1, 0)
	near(t, "hi", hi, 13, 0)
	near(t, "achieved", achieved, 1-2.0/64, 1e-12)
}

// Ties take the normal approximation, with R's tie and continuity
// corrections. d = 1, 2, 2, 3, -1, 4, 5, 2: |d| ranks 1.5, 4, 4, 6, 1.5,
// 7, 8, 4, V = 34.5; mean 18, variance 8·9·17/24 − (6 + 24)/48 = 50.375;
// z = (16.5 − 0.5)/√50.375 = 2.2543, p = 2(1 − Φ(z)) = 0.02418.
func TestSignedRankTies(t *testing.T) {
	d := []float64{1, 2, 2, 3, -1, 4, 5, 2}
	p, exact := SignedRank(d)
	if exact {
		t.Error("ties: want the normal approximation")
	}
	near(t, "p", p, 0.02418, 2e-4)
	// Zeros are dropped (and force the approximation): the same V.
	p0, exact0 := SignedRank(append([]float64{0, 0}, d...))
	if exact0 {
		t.Error("zeros: want the normal approximation")
	}
	near(t, "p with zeros", p0, p, 1e-12)
	if p, _ := SignedRank([]float64{0, 0, 0}); p != 1 {
		t.Errorf("all zero: p = %g, want 1", p)
	}
}

// The exact and the normal p-values agree for a sample at the boundary
// (49 and 50 values): the switch does not jump.
func TestSignedRankExactMatchesNormal(t *testing.T) {
	d := make([]float64, 50)
	for i := range d {
		d[i] = float64(i+1) * 0.01
		if i%3 == 0 {
			d[i] = -d[i]
		}
	}
	pe, exact := SignedRank(d[:49])
	if !exact {
		t.Fatal("49 values: want exact")
	}
	pn, exact := SignedRank(d)
	if exact {
		t.Fatal("50 values: want the normal approximation")
	}
	if pe <= 0 || pn <= 0 || math.Abs(math.Log(pe/pn)) > 0.5 {
		t.Errorf("p at 49 (exact) %g and 50 (normal) %g: far apart", pe, pn)
	}
}

// MDE with the t quantiles at 10 pairs: t(.975, 9) = 2.262157 and t(.8, 9)
// = 0.883404, so sd 0.1 gives exp(3.145561 × 0.1/√10) − 1 = 10.46%.
func TestMDE(t *testing.T) {
	near(t, "paired", MDEPaired(0.1, 10, 0.05), 100*(math.Exp(3.145561*0.1/math.Sqrt(10))-1), 1e-3)
	// Two samples of 10 with sd 0.1 each: se = 0.1·√(2/10), df 18:
	// t(.975, 18) = 2.100922, t(.8, 18) = 0.861968.
	near(t, "two-sample", MDETwoSample(0.1, 10, 0.1, 10, 0.05), 100*(math.Exp(2.962890*0.1*math.Sqrt(0.2))-1), 1e-3)
	if !math.IsNaN(MDEPaired(0.1, 1, 0.05)) {
		t.Error("one pair: want NaN")
	}
	// More pairs, smaller MDE: √n.
	if a, b := MDEPaired(0.2, 10, 0.05), MDEPaired(0.2, 40, 0.05); !(b < a/1.9) {
		t.Errorf("MDE at 40 pairs %g not about half that at 10 (%g)", b, a)
	}
}

func TestPairedTest(t *testing.T) {
	base := []int64{100, 110, 90, 105, 95, 100, 102, 98, 101, 99}
	head := make([]int64, len(base))
	for i, b := range base {
		head[i] = b * 110 / 100 // +10% each
		if i%2 == 0 {
			head[i]++
		}
	}
	p := PairedTest(base, head, Alpha)
	if p.N != 10 || !p.Significant {
		t.Fatalf("n %d significant %v", p.N, p.Significant)
	}
	if d := p.DeltaPct(); d < 9.5 || d > 11 {
		t.Errorf("Δ %.2f%%, want about +10%%", d)
	}
	lo, hi := p.CIPct()
	if !(lo <= p.DeltaPct() && p.DeltaPct() <= hi) || lo < 9 || hi > 12 {
		t.Errorf("CI [%.2f, %.2f] around %.2f", lo, hi, p.DeltaPct())
	}
	if p.MDEPct > 2 {
		t.Errorf("MDE %.2f%%: the ratios barely vary", p.MDEPct)
	}
	if hw := p.HalfWidthPct(); !(hw > 0 && hw < 2) {
		t.Errorf("half-width %.3f%%", hw)
	}
}

// PairedRounds by hand: one block per round, estimates 0.01, 0.03 and
// 0.02 (the Hodges–Lehmann estimate of one value is the value): mean
// 0.02, sd 0.01, t = 0.02/(0.01/√3) = 3.4641 with 2 degrees of freedom,
// whose CDF is 1/2 + t/(2√(2 + t²)): two-sided p = 0.07418; the interval
// 0.02 ± t₀.₉₇₅(2) · 0.01/√3 = 0.02 ± 4.3027 · 0.0057735.
func TestPairedRoundsKnownValues(t *testing.T) {
	p := PairedRounds([]float64{0.01, 0.03, 0.02}, []int{1, 2, 3}, 0.05)
	if p.Rounds != 3 || p.N != 3 || p.Significant {
		t.Fatalf("%+v, want 3 rounds of 3 pairs, not significant", p)
	}
	near(t, "p", p.P, 0.07418, 1e-4)
	near(t, "ln ratio", math.Log(p.Ratio), 0.02, 1e-12)
	near(t, "ln lo", math.Log(p.Lo), 0.02-4.3027*0.0057735, 1e-4)
	near(t, "ln hi", math.Log(p.Hi), 0.02+4.3027*0.0057735, 1e-4)
	near(t, "sd", p.SD, 0.01, 1e-12)
}

// An environment drawn once per round — every block of a round shifted
// alike, the shifts random — makes the blocks' signed-rank test find a
// change that is not there in most sweeps; the test across rounds finds
// one in about α of them. And a real change as large as the shifts is
// still found across rounds.
func TestPairedRoundsHoldsAlpha(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const sweeps, rounds, blocks = 400, 6, 5
	var overBlocks, overRounds, found int
	for range sweeps {
		for _, change := range []float64{0, 0.08} {
			var d []float64
			var round []int
			for r := range rounds {
				shift := 0.04 * rng.NormFloat64() // the round's draw
				for range blocks {
					d = append(d, change+shift+0.02*rng.NormFloat64())
					round = append(round, r+1)
				}
			}
			byRounds := PairedRounds(d, round, 0.05)
			if change == 0 {
				if PairedLog(d, 0.05).Significant {
					overBlocks++
				}
				if byRounds.Significant {
					overRounds++
				}
			} else if byRounds.Significant && byRounds.Ratio > 1 {
				found++
			}
		}
	}
	if rate := float64(overRounds) / sweeps; rate > 0.08 {
		t.Errorf("across rounds: %d of %d A/A sweeps significant (%.1f%%), want about 5%%", overRounds, sweeps, 100*rate)
	}
	if rate := float64(overBlocks) / sweeps; rate < 0.2 {
		t.Errorf("over the blocks: %d of %d A/A sweeps significant (%.1f%%); the case is meant to show the blocks' test fooled", overBlocks, sweeps, 100*rate)
	}
	if rate := float64(found) / sweeps; rate < 0.7 {
		t.Errorf("an 8%% change found across rounds in %d of %d sweeps, want most", found, sweeps)
	}
	t.Logf("A/A significant: blocks %d/%d, rounds %d/%d; an 8%% change found in %d/%d", overBlocks, sweeps, overRounds, sweeps, found, sweeps)
}

// TestMDENeverWhereTheTestCannot: an MDE is ∞ exactly where the test that
// reads the change cannot find any — samples entirely apart, the most a
// rank test can see, are not significant — and finite everywhere else:
// 3 runs a side never make a two-sided Mann-Whitney test significant, 4
// do; 5 pairs never make a signed-rank test significant, 6 do; the
// gate's one-sided tests need fewer. A finite MDE at 3+3 ("5%") claimed a
// resolution no run count of that size has.
func TestMDENeverWhereTheTestCannot(t *testing.T) {
	near(t, "Mann-Whitney floor 3+3", MannWhitneyFloor(3, 3, 2), 0.1, 1e-12)
	near(t, "Mann-Whitney floor 4+4", MannWhitneyFloor(4, 4, 2), 2.0/70, 1e-12)
	near(t, "Mann-Whitney floor 3+4 one-sided", MannWhitneyFloor(3, 4, 1), 1.0/35, 1e-12)
	near(t, "signed-rank floor 5", SignedRankFloor(5, 2), 0.0625, 1e-12)
	near(t, "signed-rank floor 5 one-sided", SignedRankFloor(5, 1), 0.03125, 1e-12)

	apart := func(n int, from, step int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = from + step*int64(i)
		}
		return out
	}
	for n1 := 2; n1 <= 6; n1++ {
		for n2 := 2; n2 <= 6; n2++ {
			base, head := apart(n1, 1000, 7), apart(n2, 2000, 11)
			finds := MannWhitney(base, head, Alpha).Significant
			if mde := MDEOf(base, head, Alpha); math.IsInf(mde, 1) == finds || math.IsNaN(mde) {
				t.Errorf("%d+%d runs: two-sided test significant %v on samples apart, MDE %.3g", n1, n2, finds, mde)
			}
			finds = MannWhitneyBeyond(base, head, 1, true, Alpha).Significant
			if mde := mdeOf(base, head, Alpha, 1); math.IsInf(mde, 1) == finds {
				t.Errorf("%d+%d runs: one-sided test significant %v on samples apart, MDE %.3g", n1, n2, finds, mde)
			}
		}
	}
	for n := 2; n <= 9; n++ {
		d := make([]float64, n)
		for i := range d {
			d[i] = 0.1 + 0.01*float64(i) // every pair slower, by different amounts
		}
		p := PairedLog(d, Alpha)
		if math.IsInf(p.MDEPct, 1) == p.Significant || math.IsNaN(p.MDEPct) {
			t.Errorf("%d pairs: signed-rank test significant %v on ratios of one sign, MDE %.3g", n, p.Significant, p.MDEPct)
		}
	}
}

// TestIntervalNamesItsCoverage: below 6 pairs no signed-rank interval
// covers 95% — at 5 pairs the widest, from the smallest Walsh average to
// the largest, covers 1 − 2/32 = 93.75% — and such an interval can leave
// out 0 while the test (p = 0.0625) finds nothing. A row then names the
// coverage it has beside the interval; at 10 pairs, where 95% is
// reached, it names none.
func TestIntervalNamesItsCoverage(t *testing.T) {
	five := PairedLog([]float64{0.1, 0.12, 0.15, 0.2, 0.3}, Alpha)
	near(t, "coverage at 5 pairs", five.Achieved, 0.9375, 1e-12)
	if lo, _ := five.CIPct(); lo <= 0 || five.Significant {
		t.Fatalf("5 pairs of one sign: interval from %+.1f%%, significant %v: want an interval above 0, not significant", lo, five.Significant)
	}
	row := MetricRow{InBase: true, InHead: true, Base: Summary{N: 5}, Head: Summary{N: 5}, Paired: &five,
		DeltaPct: five.DeltaPct(), Test: Significance{P: five.P, Alpha: Alpha, Significant: five.Significant}}
	if d := row.Delta(); !strings.Contains(d, "] 93.8% CI") || !strings.HasPrefix(d, "~ (") {
		t.Errorf("5 pairs: row reads %q, want the interval's 93.8%% coverage beside it", d)
	}
	ten := PairedLog([]float64{0.1, -0.12, 0.15, 0.2, -0.3, 0.05, 0.02, -0.01, 0.07, 0.11}, Alpha)
	if ten.Achieved < 1-Alpha {
		t.Fatalf("10 pairs: coverage %.4f below 95%%", ten.Achieved)
	}
	row.Paired, row.DeltaPct = &ten, ten.DeltaPct()
	if d := row.Delta(); strings.Contains(d, "CI") {
		t.Errorf("10 pairs: row reads %q, want no coverage named", d)
	}
}
