package reporters

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// histBins is the number of bins a text histogram aims for.
const histBins = 12

// histBarWidth is the widest bar, in characters.
const histBarWidth = 24

// niceStep returns the smallest 1, 2 or 5 × 10ⁿ that is >= x (and >= 1).
func niceStep(x float64) int64 {
	if x <= 1 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= x {
			return int64(m * pow)
		}
	}
	return int64(10 * pow)
}

// binning is a set of equal-width bins over microsecond values, with an
// overflow bin for values at or above hi.
type binning struct {
	lo, width int64
	n         int
}

func (b binning) hi() int64 { return b.lo + int64(b.n)*b.width }

// index is the bin of v; n is the overflow bin.
func (b binning) index(v int64) int {
	if v >= b.hi() {
		return b.n
	}
	return max(0, int((v-b.lo)/b.width))
}

// newBinning chooses about histBins bins of a 1/2/5×10ⁿ width covering the
// samples up to the smallest of their maximum, their p99 and ten times their
// median, so one stalled run does not squash every other sample into the
// first bin (values beyond land in the overflow bin).
func newBinning(sets ...[]int64) binning {
	var all []int64
	for _, s := range sets {
		all = append(all, s...)
	}
	if len(all) == 0 {
		return binning{lo: 0, width: 1, n: 1}
	}
	slices.Sort(all)
	lo, hi := all[0], all[len(all)-1]
	p99 := all[nearestRank(len(all), 99)]
	med := all[nearestRank(len(all), 50)]
	if p99 < hi {
		hi = p99
	}
	if med > 0 && 10*med < hi {
		hi = 10 * med
	}
	width := niceStep(float64(hi-lo) / histBins)
	if hi == lo {
		width = niceStep(float64(max(lo, 10)) / histBins)
	}
	start := (lo / width) * width
	n := int((hi-start)/width) + 1
	n = min(n, histBins+2)
	return binning{lo: start, width: width, n: n}
}

// nearestRank is the index of the q-th percentile (0..100) of n sorted
// values by the nearest-rank rule, the rule results files use.
func nearestRank(n int, q float64) int {
	i := int(math.Ceil(q/100*float64(n))) - 1
	return min(max(i, 0), n-1)
}

// edgeUnit picks the unit bin edges print in, by the range's top and the
// bin width, so edges stay short and exact ("1.05–1.1s", "250–300ms",
// "40–45µs").
func edgeUnit(b binning) (div float64, unit string) {
	switch {
	case b.hi() >= 1_000_000 && b.width >= 10_000:
		return 1e6, "s"
	case b.hi() >= 1_000 && b.width >= 10:
		return 1e3, "ms"
	default:
		return 1, "µs"
	}
}

func edge(v int64, div float64) string {
	return strconv.FormatFloat(float64(v)/div, 'f', -1, 64)
}

// textHistogram draws base (may be nil) and head as side-by-side bars over
// the same bins. negBase and negHead are counts of negative samples (clamped
// to 0 in the values), drawn in their own "<0 (skew)" bin.
func textHistogram(base, head []int64, negBase, negHead int, withBase bool) string {
	b := newBinning(base, head)
	count := func(vals []int64) []int {
		c := make([]int, b.n+1)
		for _, v := range vals {
			c[b.index(v)]++
		}
		return c
	}
	cb, ch := count(base), count(head)
	div, unit := edgeUnit(b)
	type row struct {
		label  string
		bc, hc int
	}
	var rows []row
	if negBase+negHead > 0 {
		rows = append(rows, row{"<0 (skew)", negBase, negHead})
	}
	for i := range b.n {
		lo := b.lo + int64(i)*b.width
		rows = append(rows, row{edge(lo, div) + "–" + edge(lo+b.width, div) + unit, cb[i], ch[i]})
	}
	if cb[b.n]+ch[b.n] > 0 {
		rows = append(rows, row{"≥" + edge(b.hi(), div) + unit, cb[b.n], ch[b.n]})
	}
	peak, lw := 1, 0
	for _, r := range rows {
		peak = max(peak, r.bc, r.hc)
		lw = max(lw, utf8.RuneCountInString(r.label))
	}
	bar := func(n int, ch string) string {
		w := int(math.Round(float64(n) / float64(peak) * histBarWidth))
		if n > 0 && w == 0 {
			w = 1 // a bin with samples is never drawn empty
		}
		return strings.Repeat(ch, w) + strings.Repeat(" ", histBarWidth-w)
	}
	var sb strings.Builder
	pad := func(s string) string { return s + strings.Repeat(" ", lw-utf8.RuneCountInString(s)) }
	if withBase {
		fmt.Fprintf(&sb, "%s  %-*s %5s   %-*s %5s\n", pad(""), histBarWidth, "baseline ░", "n", histBarWidth, "this run █", "n")
	} else {
		fmt.Fprintf(&sb, "%s  %-*s %5s\n", pad(""), histBarWidth, "this run █", "n")
	}
	for _, r := range rows {
		if withBase {
			fmt.Fprintf(&sb, "%s  %s %5d   %s %5d\n", pad(r.label), bar(r.bc, "░"), r.bc, bar(r.hc, "█"), r.hc)
		} else {
			fmt.Fprintf(&sb, "%s  %s %5d\n", pad(r.label), bar(r.hc, "█"), r.hc)
		}
	}
	return sb.String()
}
