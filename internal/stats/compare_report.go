package stats

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/durabench/durabench/metrics"
)

// WriteText renders the comparison as aligned columns in the style of
// benchstat: per metric, each cell's median ± the confidence interval on
// each side, then the change ("~" when not significant) with the test's
// p-value and sample sizes, and a geomean row; then run/error/stall counts
// and the cells present on one side only.
func (c *Comparison) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c.writeHeader(bw, "")
	keys := c.allKeys()
	labels, common := cellLabels(keys)
	label := labelMap(keys, labels)
	if common != "" {
		fmt.Fprintf(bw, "all cells: %s\n", common)
	}
	if note := c.pairedNote(); note != "" {
		fmt.Fprintln(bw, note)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(bw, "warning: %s\n", w)
	}
	ci := fmt.Sprintf("%.0f%% CI", 100*c.Confidence)
	for _, m := range c.Metrics {
		fmt.Fprintln(bw)
		t := alignedTable{align: "lrrrl"}
		if c.HasNull {
			t.align = "lrrrrl"
		}
		head := []string{m.Metric + metricStatNote(m), c.Base.Label, c.Head.Label, "vs base"}
		sub := []string{"", "median ± " + ci, "median ± " + ci, ""}
		if c.HasNull {
			head, sub = append(head, "null Δ"), append(sub, "")
		}
		t.add(append(head, "")...)
		t.add(append(sub, "")...)
		for _, r := range m.Rows {
			cols := []string{label[r.Cell], summaryCell(r.InBase, r.Base), summaryCell(r.InHead, r.Head), deltaCell(r)}
			if c.HasNull {
				cols = append(cols, nullCell(r))
			}
			t.add(append(cols, testCell(r))...)
		}
		if g := m.Geomean; g.Cells > 1 {
			cols := []string{"geomean", metrics.FormatMicros(g.Base), metrics.FormatMicros(g.Head), pctCell(g.DeltaPct)}
			if c.HasNull {
				cols = append(cols, "")
			}
			t.add(append(cols, geomeanNote(g))...)
		}
		t.write(bw, "  ")
	}
	for _, m := range c.Metrics {
		if len(m.Shares) == 0 {
			continue
		}
		fmt.Fprintf(bw, "\n%s fast-mode share: runs under %d × the fastest run of either side (Fisher's exact test)\n", m.Metric, FastFactor)
		t := alignedTable{align: "lrrrrl"}
		t.add("cell", "under", c.Base.Label, c.Head.Label, "vs base", "")
		for _, r := range m.Shares {
			t.add(label[r.Cell], metrics.FormatMicros(r.ThresholdUS), FormatShare(r.BaseFast, r.BaseN), FormatShare(r.HeadFast, r.HeadN), shareDelta(r), fmt.Sprintf("(p=%.3f n=%d+%d runs)", r.P, r.BaseN, r.HeadN))
		}
		t.write(bw, "  ")
	}
	if len(c.Counts) > 0 {
		fmt.Fprintln(bw)
		t := alignedTable{}
		t.add("counts", c.Base.Label+" runs", "errors", "stalls", c.Head.Label+" runs", "errors", "stalls")
		for _, r := range c.Counts {
			b := countCells(r.InBase, r.Base)
			h := countCells(r.InHead, r.Head)
			t.add(label[r.Cell], b[0], b[1], b[2], h[0], h[1], h[2])
		}
		t.write(bw, "  ")
	}
	writeOneSided(bw, "only in "+c.Base.Label, c.OnlyBase, "")
	writeOneSided(bw, "only in "+c.Head.Label, c.OnlyHead, "")
	return bw.Flush()
}

// WriteMarkdown renders the comparison as GitHub-flavoured markdown: one
// table per metric, a counts table, and the one-sided cells.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c.writeHeader(bw, "- ")
	keys := c.allKeys()
	labels, common := cellLabels(keys)
	label := labelMap(keys, labels)
	if common != "" {
		fmt.Fprintf(bw, "- all cells: `%s`\n", common)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(bw, "- ⚠️ %s\n", mdEscape(w))
	}
	fmt.Fprintf(bw, "\nThe unit of every test is the run: a metric with one sample per run is tested on it, one with several on one aggregate per run (its median, or its mean for step-to-step overhead), and n counts runs. "+
		"Medians of that per-run statistic with their %.0f%% confidence interval; Δ is the change of the medians, `~` where the Mann-Whitney U test finds no significant difference (α = %g).", 100*c.Confidence, c.Alpha)
	if c.HasNull {
		fmt.Fprintf(bw, " The null Δ is %s against %s, a second sweep of the baseline: a significant Δ no larger than it is noise (`~ … ≤ null`).", mdEscape(c.Null.Label), mdEscape(c.Base.Label))
	}
	if slices.ContainsFunc(c.Metrics, func(m MetricComparison) bool { return metrics.BetterOf(m.Metric) == metrics.Informational }) {
		bw.WriteString(" An informational metric can fall when the engine only got slower (see its definition): its Δ is a change, never a gain or a loss.")
	}
	if note := c.pairedNote(); note != "" {
		bw.WriteString(" " + note)
	}
	bw.WriteString(" MDE is the minimum detectable effect: the change the test finds 80% of the time at this spread and n; ∞ where n is too small for the test ever to reach α.")
	bw.WriteString("\n")
	for _, m := range c.Metrics {
		fmt.Fprintf(bw, "\n#### %s%s\n\n", m.Metric, metricStatNote(m))
		if c.HasNull {
			fmt.Fprintf(bw, "| cell | %s | %s | Δ | null Δ | p | n | MDE |\n|---|--:|--:|--:|--:|--:|--:|--:|\n", mdEscape(c.Base.Label), mdEscape(c.Head.Label))
		} else {
			fmt.Fprintf(bw, "| cell | %s | %s | Δ | p | n | MDE |\n|---|--:|--:|--:|--:|--:|--:|\n", mdEscape(c.Base.Label), mdEscape(c.Head.Label))
		}
		for _, r := range m.Rows {
			p, n := "", ""
			if r.InBase && r.InHead && !math.IsNaN(r.Test.P) {
				p = fmt.Sprintf("%.3f", r.Test.P)
				n = fmt.Sprintf("%d+%d", r.Test.N1, r.Test.N2)
				if r.Unit == UnitSample {
					n += " samples"
				}
				if r.Paired != nil {
					n = fmt.Sprintf("%d pairs", r.Paired.N)
				}
			}
			null := ""
			if c.HasNull {
				null = " " + nullCell(r) + " |"
			}
			fmt.Fprintf(bw, "| %s | %s | %s | %s |%s %s | %s | %s |\n", mdEscape(label[r.Cell]),
				summaryCell(r.InBase, r.Base), summaryCell(r.InHead, r.Head), mdDelta(r), null, p, n, FormatMDE(r.MDEPct))
		}
		if g := m.Geomean; g.Cells > 1 {
			null := ""
			if c.HasNull {
				null = " |"
			}
			fmt.Fprintf(bw, "| **geomean** | %s | %s | %s |%s | %s | |\n", metrics.FormatMicros(g.Base), metrics.FormatMicros(g.Head), pctCell(g.DeltaPct), null, geomeanNote(g))
		}
		if len(m.Shares) > 0 {
			fmt.Fprintf(bw, "\n%s is bimodal: the share of runs in its fast mode (under %d × the fastest run of either side), compared as a proportion (Fisher's exact test).\n\n", m.Metric, FastFactor)
			fmt.Fprintf(bw, "| cell | under | %s | %s | Δ | p | n |\n|---|--:|--:|--:|--:|--:|--:|\n", mdEscape(c.Base.Label), mdEscape(c.Head.Label))
			for _, r := range m.Shares {
				fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %.3f | %d+%d |\n", mdEscape(label[r.Cell]), metrics.FormatMicros(r.ThresholdUS),
					FormatShare(r.BaseFast, r.BaseN), FormatShare(r.HeadFast, r.HeadN), shareDelta(r), r.P, r.BaseN, r.HeadN)
			}
		}
	}
	if len(c.Counts) > 0 {
		fmt.Fprintf(bw, "\n#### runs, errors, stalls\n\n| cell | runs | errors | stalls |\n|---|--:|--:|--:|\n")
		for _, r := range c.Counts {
			b := countCells(r.InBase, r.Base)
			h := countCells(r.InHead, r.Head)
			fmt.Fprintf(bw, "| %s | %s → %s | %s | %s |\n", mdEscape(label[r.Cell]), b[0], h[0],
				countChange(r.InBase, r.InHead, r.Base.Errors, r.Head.Errors, b[1], h[1]),
				countChange(r.InBase, r.InHead, r.Base.Stalls, r.Head.Stalls, b[2], h[2]))
		}
	}
	writeOneSided(bw, "only in "+mdEscape(c.Base.Label), c.OnlyBase, "- ")
	writeOneSided(bw, "only in "+mdEscape(c.Head.Label), c.OnlyHead, "- ")
	return bw.Flush()
}

func (c *Comparison) writeHeader(w io.Writer, bullet string) {
	sides := []struct {
		side string
		info SweepInfo
	}{{"base", c.Base}, {"head", c.Head}}
	if c.HasNull {
		sides = append(sides, struct {
			side string
			info SweepInfo
		}{"null", c.Null})
	}
	for _, s := range sides {
		var extra []string
		if s.info.Commit != "" && s.info.Commit != s.info.Label && shortCommit(s.info.Commit) != s.info.Label {
			extra = append(extra, "commit "+shortCommit(s.info.Commit))
		}
		if s.info.DurabenchVersion != "" {
			extra = append(extra, "durabench "+s.info.DurabenchVersion)
		}
		if !s.info.StartedAt.IsZero() {
			extra = append(extra, s.info.StartedAt.UTC().Format("2006-01-02 15:04Z"))
		}
		if s.info.VirtualTime {
			extra = append(extra, "virtual time")
		}
		if s.info.Partial {
			extra = append(extra, "PARTIAL")
		}
		if s.info.Error != "" {
			extra = append(extra, "sweep error: "+s.info.Error)
		}
		line := bullet + s.side + ": " + s.info.Label
		if len(extra) > 0 {
			line += " (" + strings.Join(extra, ", ") + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func (c *Comparison) allKeys() []CellKey {
	keys := make([]CellKey, len(c.Counts))
	for i, r := range c.Counts {
		keys[i] = r.Cell
	}
	return keys
}

func labelMap(keys []CellKey, labels []string) map[CellKey]string {
	m := make(map[CellKey]string, len(keys))
	for i, k := range keys {
		m[k] = labels[i]
	}
	return m
}

func summaryCell(present bool, s Summary) string {
	if !present {
		return "—"
	}
	if s.N == 0 {
		return "no values"
	}
	v := metrics.FormatMicros(s.Median)
	if pct, ok := s.RangePct(); ok {
		return fmt.Sprintf("%s ± %.0f%%", v, pct)
	}
	return v + " ± ∞"
}

func deltaCell(r MetricRow) string {
	switch {
	case !r.InBase:
		return "(head only)"
	case !r.InHead:
		return "(base only)"
	}
	return r.Delta()
}

func mdDelta(r MetricRow) string {
	d := deltaCell(r)
	if r.InBase && r.InHead && r.Test.Significant && r.Verdict != VerdictNoise && !math.IsNaN(r.DeltaPct) {
		return "**" + d + "**"
	}
	return d
}

func testCell(r MetricRow) string {
	if !r.InBase || !r.InHead || math.IsNaN(r.Test.P) {
		return ""
	}
	mde := ""
	if !math.IsNaN(r.MDEPct) {
		mde = ", MDE " + FormatMDE(r.MDEPct)
	}
	if r.Paired != nil {
		return fmt.Sprintf("(paired p=%.3f n=%d pairs%s%s)", r.Test.P, r.Paired.N, inRounds(r.Paired), mde)
	}
	n := fmt.Sprintf("n=%d+%d", r.Test.N1, r.Test.N2)
	if r.Test.N1 == r.Test.N2 {
		n = fmt.Sprintf("n=%d", r.Test.N1)
	}
	if r.Unit == UnitSample {
		n += " pooled samples"
	} else {
		n += " runs"
	}
	return fmt.Sprintf("(p=%.3f %s%s)", r.Test.P, n, mde)
}

// FormatMDE renders a minimum detectable effect: "2.4%", "∞" when no change
// is ever found at this n, "—" when there is none.
func FormatMDE(pct float64) string {
	switch {
	case math.IsNaN(pct):
		return "—"
	case math.IsInf(pct, 1):
		return "∞"
	case pct >= 1000:
		return ">1000%"
	case pct >= 10:
		return fmt.Sprintf("%.0f%%", pct)
	}
	return fmt.Sprintf("%.1f%%", pct)
}

// pairedNote says how paired rows were tested; "" when none is.
func (c *Comparison) pairedNote() string {
	in := c.Interleave
	if in == nil {
		return ""
	}
	note := fmt.Sprintf("paired: one interleaved sweep, %s %s (base) against %s (head) run by run in %s blocks; "+
		"the test is the Wilcoxon signed-rank test of the blocks' log ratios, Δ the Hodges–Lehmann estimate of the ratio with its %.0f%% CI (where the pairs are too few for that, the coverage they give, beside it)",
		in.Dimension, in.A, in.B, in.Order, 100*c.Confidence)
	if in.Rounds > 1 {
		note = fmt.Sprintf("paired: one interleaved sweep, %s %s (base) against %s (head) run by run in %s blocks, in %d rounds on processes started afresh; "+
			"the test is Student's t across the rounds of each round's Hodges–Lehmann estimate of its blocks' log ratios, Δ their mean with its %.0f%% CI",
			in.Dimension, in.A, in.B, in.Order, in.Rounds, 100*c.Confidence)
	}
	if in.PrecisionPct > 0 {
		note += fmt.Sprintf(" (blocks added until ±%g%%)", in.PrecisionPct)
	}
	return note + "."
}

// FormatShare spells fast of n runs with its percentage: "3/30 (10%)".
func FormatShare(fast, n int) string {
	return fmt.Sprintf("%d/%d (%.0f%%)", fast, n, 100*float64(fast)/float64(n))
}

// shareDelta is the change in percentage points, "~" when not significant.
func shareDelta(r ShareRow) string {
	if !r.Significant {
		return "~"
	}
	return fmt.Sprintf("%+.0f pp", r.DeltaPP)
}

// nullCell is the null sweep's Δ of a row ("" without one).
func nullCell(r MetricRow) string {
	if !r.InNull || math.IsNaN(r.NullDeltaPct) {
		return "—"
	}
	return fmt.Sprintf("%+.2f%%", r.NullDeltaPct)
}

// metricStatNote names the per-run statistic a metric's rows test when it
// is an aggregate of several samples per run, and says when the metric is
// informational (its changes are not judged), e.g. " (run median;
// informational)".
func metricStatNote(m MetricComparison) string {
	var notes []string
	for _, r := range m.Rows {
		if r.Statistic != "" && r.Statistic != "run value" {
			notes = append(notes, r.Statistic)
			break
		}
	}
	if metrics.BetterOf(m.Metric) == metrics.Informational {
		notes = append(notes, "informational")
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

func pctCell(pct float64) string {
	if math.IsNaN(pct) {
		return "?"
	}
	return fmt.Sprintf("%+.2f%%", pct)
}

func geomeanNote(g GeomeanRow) string {
	if g.Excluded > 0 {
		return fmt.Sprintf("(%d cells; %d with a zero median left out)", g.Cells, g.Excluded)
	}
	return fmt.Sprintf("(%d cells)", g.Cells)
}

func countCells(present bool, c CellCounts) [3]string {
	if !present {
		return [3]string{"—", "—", "—"}
	}
	return [3]string{fmt.Sprint(c.Runs), fmt.Sprint(c.Errors), fmt.Sprint(c.Stalls)}
}

// countChange renders "base → head", bold when the count grew.
func countChange(inBase, inHead bool, b, h int, bs, hs string) string {
	s := bs + " → " + hs
	if inBase && inHead && h > b {
		return "**" + s + "**"
	}
	return s
}

func writeOneSided(w io.Writer, title string, keys []CellKey, bullet string) {
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s (%d cells, not compared):\n", title, len(keys))
	if bullet == "" {
		bullet = "  "
	}
	for _, k := range keys {
		if bullet == "- " {
			fmt.Fprintf(w, "%s`%s`\n", bullet, k)
		} else {
			fmt.Fprintf(w, "%s%s\n", bullet, k)
		}
	}
}

// mdEscape keeps a value from breaking a markdown table.
func mdEscape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// alignedTable lays out rows of text columns padded to their widest cell.
// align gives each column's alignment, 'l' or 'r'; columns past it are
// right-aligned, except the first, which is always left-aligned. A trailing
// left-aligned column is not padded.
type alignedTable struct {
	rows  [][]string
	align string
}

func (t *alignedTable) add(cols ...string) { t.rows = append(t.rows, cols) }

func (t *alignedTable) left(i int) bool {
	return i == 0 || (i < len(t.align) && t.align[i] == 'l')
}

func (t *alignedTable) write(w io.Writer, sep string) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString(sep)
			}
			if t.left(i) {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// inRounds is " in R rounds" for a paired test across rounds, else "".
func inRounds(p *Paired) string {
	if p == nil || p.Rounds == 0 {
		return ""
	}
	return fmt.Sprintf(" in %d rounds", p.Rounds)
}
