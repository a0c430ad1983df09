package stats

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/durabench/durabench/results"
)

// Interleaved reports whether f is an interleaved sweep (sweep
// --interleave): its cells are pairs, A and B, to be compared with each
// other (SplitSides).
func Interleaved(f *results.File) bool { return f != nil && f.Plan.Interleave != nil }

// SplitSides returns the two sides of an interleaved sweep as two files:
// base holds the A cells, head the B cells, each A cell keyed like its
// partner so that Compare and Gate match the pair. With pairs of
// versions or switch sets, an A cell takes its partner's version or
// switches (the head's: a rule's selector names the head's cells); with
// pairs of targets, both sides are keyed by their point alone, as
// SelectEngine keys them. The labels name the sides ("version baseline",
// "version resilient"). A cell without a partner in the file (a partial
// sweep) is left out and named in missing.
func SplitSides(f *results.File) (base, head *results.File, baseLabel, headLabel string, missing []string, err error) {
	in := f.Plan.Interleave
	if in == nil {
		return nil, nil, "", "", nil, fmt.Errorf("%w: %s is not an interleaved sweep (sweep --interleave): compare needs BASE and HEAD", ErrRules, fileName(f))
	}
	type pair struct{ a, b *results.Cell }
	pairs := map[string]*pair{}
	var ids []string
	for i := range f.Cells {
		c := &f.Cells[i]
		if c.Pairing == nil {
			missing = append(missing, KeyOf(c).String())
			continue
		}
		p := pairs[c.Pairing.Pair]
		if p == nil {
			p = &pair{}
			pairs[c.Pairing.Pair] = p
			ids = append(ids, c.Pairing.Pair)
		}
		if c.Pairing.Side == results.SideA {
			p.a = c
		} else {
			p.b = c
		}
	}
	b, h := *f, *f
	b.Cells, h.Cells = []results.Cell{}, []results.Cell{}
	for _, id := range ids {
		p := pairs[id]
		if p.a == nil || p.b == nil {
			one := p.a
			if one == nil {
				one = p.b
			}
			missing = append(missing, KeyOf(one).String())
			continue
		}
		a, bc := *p.a, *p.b
		if in.Dimension == "targets" {
			for _, c := range []*results.Cell{&a, &bc} {
				c.Target, c.TargetSpec, c.Version, c.Switches, c.World, c.Profile = selected, "", "", []string{}, "", ""
			}
		} else {
			a.Target, a.TargetSpec, a.Version, a.Switches, a.World, a.Profile = bc.Target, bc.TargetSpec, bc.Version, bc.Switches, bc.World, bc.Profile
		}
		b.Cells = append(b.Cells, a)
		h.Cells = append(h.Cells, bc)
	}
	if len(h.Cells) == 0 {
		return nil, nil, "", "", nil, fmt.Errorf("%w: %s has no complete interleaved pair", ErrRules, fileName(f))
	}
	dim := strings.TrimSuffix(in.Dimension, "s")
	if dim == "switche" {
		dim = "switches"
	}
	return &b, &h, dim + " " + in.A, dim + " " + in.B, missing, nil
}

func fileName(f *results.File) string {
	if c := shortCommit(f.GitCommit); c != "" {
		return "the results of " + c
	}
	return "the results file"
}

// pairedOf returns the paired comparison of metric name between cells b
// (side A) and h (side B) of one interleaved pair: the runs of each
// block with a value on both sides. ok is false when the two are not
// partners.
func pairedOf(b, h *results.Cell, name string, alpha float64) (Paired, bool) {
	if b == nil || h == nil || b.Pairing == nil || h.Pairing == nil || b.Pairing.Pair != h.Pairing.Pair ||
		b.Pairing.Side != results.SideA || h.Pairing.Side != results.SideB {
		return Paired{}, false
	}
	av, bv, rounds := pairedValues(b.Pairing, h.Pairing, name)
	d := make([]float64, len(av))
	for i := range av {
		d[i] = LogRatio(av[i], bv[i])
	}
	if rounds != nil {
		return PairedRounds(d, rounds, alpha), true
	}
	return PairedLog(d, alpha), true
}

// pairedValues are the two sides' values of metric name, block by block,
// over the blocks where both runs have one, and each block's round when
// the pair ran in rounds (nil otherwise).
func pairedValues(a, b *results.Pairing, name string) (av, bv []int64, rounds []int) {
	byBlock := map[int]int64{}
	for _, r := range a.Runs {
		if v, ok := r.Values[name]; ok {
			byBlock[r.Block] = v
		}
	}
	type pv struct {
		block, round int
		a, b         int64
	}
	var ps []pv
	inRounds := false
	for _, r := range b.Runs {
		v, ok := r.Values[name]
		if !ok {
			continue
		}
		if x, ok := byBlock[r.Block]; ok {
			ps = append(ps, pv{r.Block, r.Round, x, v})
			inRounds = inRounds || r.Round > 0
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].block < ps[j].block })
	for _, p := range ps {
		av, bv = append(av, p.a), append(bv, p.b)
		if inRounds {
			rounds = append(rounds, p.round)
		}
	}
	return av, bv, rounds
}

// pairedBeyond is the gate's one-sided paired test of a relative rule:
// that the log ratios lie beyond ln(threshold) — above it (above set:
// "< 1.10x baseline" fails when significantly above 1.10) or below it.
// A pair that ran in rounds is tested across its rounds (PairedRounds).
func pairedBeyond(b, h *results.Cell, name string, threshold float64, above bool) (p float64, n int) {
	av, bv, rounds := pairedValues(b.Pairing, h.Pairing, name)
	d := make([]float64, len(av))
	shift := math.Log(threshold)
	for i := range av {
		d[i] = LogRatio(av[i], bv[i]) - shift
		if !above {
			d[i] = -d[i]
		}
	}
	if rounds != nil {
		if p, r := PairedRoundsBeyond(d, rounds); r >= 2 {
			return p, r
		}
	}
	return SignedRankGreater(d), len(d)
}

// mdeWarning is the warning of a relative rule whose threshold is within
// the minimum detectable effect of some of its cells: a change of the
// threshold's size there fails the gate less often than not.
func mdeWarning(rule Rule, cells []string, mdes []float64) string {
	if len(cells) == 0 {
		return ""
	}
	idx := make([]int, len(cells))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return cmpFloat(mdes[y], mdes[x]) })
	var parts []string
	for k, i := range idx {
		if k == 4 {
			parts = append(parts, fmt.Sprintf("%d more", len(idx)-4))
			break
		}
		mde := fmt.Sprintf("%.1f%%", mdes[i])
		if math.IsInf(mdes[i], 1) {
			mde = "∞"
		}
		parts = append(parts, fmt.Sprintf("%s MDE %s", cells[i], mde))
	}
	never := ""
	if slices.ContainsFunc(mdes, func(m float64) bool { return math.IsInf(m, 1) }) {
		never = "; ∞: too few runs for the test ever to reach α"
	}
	return fmt.Sprintf("%s (%s): its threshold, %+.1f%%, is below the minimum detectable effect of %d cell(s) (%s%s): there a change of the threshold's size passes the gate more often than not; add runs (sweep --interleave --precision) or widen the threshold",
		rule.Text, rule.Source, (rule.Threshold-1)*100, len(cells), strings.Join(parts, ", "), never)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// PairKey is the key SplitSides gives the pair whose cell c (of f, either
// side) is part of: its head cell's key, with pairs of targets keyed by
// their point alone.
func PairKey(f *results.File, c *results.Cell) CellKey {
	k := *c
	if in := f.Plan.Interleave; in != nil && in.Dimension == "targets" {
		k.Target, k.TargetSpec, k.Version, k.Switches, k.World, k.Profile = selected, "", "", []string{}, "", ""
	}
	return KeyOf(&k)
}
