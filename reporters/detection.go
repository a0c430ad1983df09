package reporters

import (
	"fmt"
	"math"
	"strings"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

// The detection section: under each scenario's table, every compared
// cell and metric with its change, the change's confidence interval when
// the comparison is paired, the test's p-value and the minimum detectable
// effect (α = 0.05, power 0.8) — "Δ +3.1% [+1.2, +5.0], MDE 2.4%". Its
// rows come from stats.Compare: of the baseline (two sweeps: Δ of the
// medians, Mann-Whitney U, the MDE from the two samples' spread), or of
// an interleaved sweep's two sides when there is no baseline (paired).

// sidesComparison is the paired comparison of an interleaved sweep's two
// sides, and the labels of its head cells by key; nil when f is not one.
func sidesComparison(f *results.File) (*stats.Comparison, map[stats.CellKey]*results.Cell) {
	if !stats.Interleaved(f) {
		return nil, nil
	}
	base, head, bl, hl, _, err := stats.SplitSides(f)
	if err != nil {
		return nil, nil
	}
	c, err := stats.Compare(base, head, stats.CompareOptions{BaseLabel: bl, HeadLabel: hl})
	if err != nil {
		return nil, nil
	}
	heads := map[stats.CellKey]*results.Cell{}
	for i := range f.Cells {
		if p := f.Cells[i].Pairing; p != nil && p.Side == results.SideB {
			heads[stats.PairKey(f, &f.Cells[i])] = &f.Cells[i]
		}
	}
	return c, heads
}

// detection writes the scenario's detection rows.
func (m *markdown) detection(sb *strings.Builder, g scenarioGroup, d detail) {
	c := m.cmp
	if c == nil {
		return
	}
	cells := cellIndex(m.f)
	var rows []string
	omitted := 0
	never := false // a row whose MDE is ∞
	for _, mc := range c.Metrics {
		if tableSkip[mc.Metric] {
			continue
		}
		for _, r := range mc.Rows {
			if r.Cell.Scenario != g.Name || !r.InBase || !r.InHead || math.IsNaN(r.Test.P) {
				continue
			}
			if d.maxRows > 0 && len(rows) >= d.maxRows {
				omitted++
				continue
			}
			cell := m.pairHeads[r.Cell]
			if cell == nil {
				cell = cells[r.Cell]
			}
			label := r.Cell.String()
			if cell != nil {
				label = m.lab.label(cell)
			}
			never = never || math.IsInf(r.MDEPct, 1)
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", metricTitle(mc.Metric), label, detectionDelta(r),
				fmt.Sprintf("%.3f", r.Test.P), detectionN(r), stats.FormatMDE(r.MDEPct)))
		}
	}
	if len(rows) == 0 {
		return
	}
	if in := c.Interleave; in != nil && m.opt.Baseline == nil {
		fmt.Fprintf(sb, "\n**%s against %s, paired** (interleaved sweep: run by run in %s blocks; Wilcoxon signed-rank test of the blocks' log ratios, Δ the Hodges–Lehmann estimate with its 95%% CI; MDE: the change found 80%% of the time at α = %g%s):\n\n",
			mdCode(in.B), mdCode(in.A), in.Order, stats.Alpha, neverNote(never, "blocks"))
	} else {
		fmt.Fprintf(sb, "\n**Detection** against the baseline (Δ of the medians of the tested per-run values, Mann-Whitney U; MDE: the change found 80%% of the time at α = %g, from the two samples' spread%s):\n\n", stats.Alpha, neverNote(never, "runs"))
	}
	sb.WriteString("| metric | cell | Δ | p | n | MDE |\n|---|---|--:|--:|--:|--:|\n")
	for _, r := range rows {
		sb.WriteString(r)
	}
	if omitted > 0 {
		fmt.Fprintf(sb, "\n_%d more row(s) left out to fit the comment; see the uploaded results._\n", omitted)
	}
}

// neverNote explains an MDE of ∞ where a row has one.
func neverNote(never bool, what string) string {
	if !never {
		return ""
	}
	return "; ∞: too few " + what + " for the test ever to reach it"
}

func mdCode(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

// detectionDelta is a row's change: "+3.1% [+1.2, +5.0]" paired, "+3.1%"
// otherwise; "~" marks a change that is not significant.
func detectionDelta(r stats.MetricRow) string {
	if math.IsNaN(r.DeltaPct) {
		return "?"
	}
	s := fmt.Sprintf("%+.1f%%", r.DeltaPct)
	if p := r.Paired; p != nil {
		lo, hi := p.CIPct()
		s += fmt.Sprintf(" [%+.1f, %+.1f]%s", lo, hi, p.Coverage(stats.Alpha))
	}
	switch {
	case !r.Test.Significant:
		return markNoise + " " + s
	case r.Verdict == stats.VerdictNoise:
		return markNoise + " " + s + " ≤ null"
	case r.DeltaPct > markThreshold:
		return "**" + s + "** " + markWorse
	case r.DeltaPct < -markThreshold:
		return "**" + s + "** " + markBetter
	}
	return "**" + s + "**"
}

func detectionN(r stats.MetricRow) string {
	if r.Paired != nil {
		return fmt.Sprintf("%d pairs", r.Paired.N)
	}
	return fmt.Sprintf("%d+%d", r.Test.N1, r.Test.N2)
}
