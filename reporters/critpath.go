package reporters

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Where the time went: each cell's critical path (results.Cell.CriticalPath)
// as a table — one row per cell, one column per category that holds time in
// some cell of the scenario (unattributed always), each the mean per run
// and its share of the cell's TTLS mean — in the text and markdown reports,
// and as stacked bars in the critical-path chart (pngpath.go). Where a
// cell's runs are recorded done well after their last step, a second table
// splits their TTC the same way (results.Cell.CompletionPath).

// pathKind is one of a cell's two critical paths: to its runs' last step
// end (TTLS) or to their terminal event (TTC).
type pathKind struct {
	metric string // "TTLS", "TTC"
	prefix string // compare's and gate's metric name prefix
	of     func(*results.Cell) []results.PathCategory
	// cat returns the cell's category name on the path, if it has one.
	cat func(c *results.Cell, name string) (results.PathCategory, bool)
}

var (
	ttlsPath = pathKind{"TTLS", metrics.PathMetricPrefix, func(c *results.Cell) []results.PathCategory { return c.CriticalPath },
		(*results.Cell).Path}
	ttcPath = pathKind{"TTC", metrics.CompletionPathMetricPrefix, func(c *results.Cell) []results.PathCategory { return c.CompletionPath },
		(*results.Cell).CompletionPathCategory}
)

// pathCells returns the cells that carry a critical path.
func pathCells(cells []*results.Cell) []*results.Cell {
	var out []*results.Cell
	for _, c := range cells {
		if len(c.CriticalPath) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// tailShare is how much later than their last step a cell's runs must be
// recorded done, on average, for the reports to split their TTC too: the
// TTC mean of the finished runs at least this share above their TTLS mean.
// Below it the path to completion is the TTLS path and the terminal write.
const tailShare = 0.10

// longTail reports whether runs whose TTC (mean) is ttc and TTLS ttls are
// recorded done well after their last step (tailShare).
func longTail(ttc, ttls float64) bool { return ttc >= (1+tailShare)*ttls }

// showsTail reports whether the reports show c's path to completion: its
// runs are recorded done well after their last step, or it splits a TTC
// but no TTLS (a scenario without a TTLS: a lone step, a hook's resume, a
// stream).
func showsTail(c *results.Cell) bool {
	return len(c.CompletionPath) > 0 && (len(c.CriticalPath) == 0 || longTail(pathTotal(ttcPath, c), pathTotal(ttlsPath, c)))
}

// tailCells returns the cells whose path to completion the reports show.
func tailCells(cells []*results.Cell) []*results.Cell {
	var out []*results.Cell
	for _, c := range cells {
		if showsTail(c) {
			out = append(out, c)
		}
	}
	return out
}

// hasTail reports whether a cell of f has its path to completion shown.
func hasTail(f *results.File) bool {
	for i := range f.Cells {
		if showsTail(&f.Cells[i]) {
			return true
		}
	}
	return false
}

// pathColumns are the categories shown for cells on k's path: those with a
// mean above zero in one of them, and unattributed, in report order.
func pathColumns(k pathKind, cells []*results.Cell) []string {
	var out []string
	for _, def := range metrics.Categories {
		show := def.Name == metrics.CatUnattributed
		for _, c := range cells {
			if pc, ok := k.cat(c, def.Name); ok && pc.Mean > 0 {
				show = true
			}
		}
		if show {
			out = append(out, def.Name)
		}
	}
	return out
}

// pathTotal is the sum of a cell's category means on k's path: the TTLS
// (TTC) mean of its finished runs.
func pathTotal(k pathKind, c *results.Cell) float64 {
	var s float64
	for _, pc := range k.of(c) {
		s += pc.Mean
	}
	return s
}

// share formats part of total as a whole percentage ("<1%" for a sliver).
func share(part, total float64) string {
	switch {
	case total <= 0 || part <= 0:
		return "0%"
	case part/total < 0.005:
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", 100*part/total)
}

// pathTable is the "where the time went" table of k's path: a header row,
// then one row per cell: its label, the TTLS (TTC) mean of its finished
// runs, and per category the mean per run and its share of that mean.
// With base, a category's mean carries its change against the baseline's
// cell, and mark's verdict on it (nil: none).
func pathTable(k pathKind, cells []*results.Cell, lab labeler, base map[stats.CellKey]*results.Cell,
	mark func(c *results.Cell, cat string, base, cur float64) string) [][]string {
	cols := pathColumns(k, cells)
	head := []string{"cell", k.metric + " mean*"}
	head = append(head, cols...)
	rows := [][]string{head}
	for _, c := range cells {
		total := pathTotal(k, c)
		row := []string{lab.label(c), metrics.FormatMicros(total)}
		b := base[cellKey(c)]
		for _, cat := range cols {
			pc, _ := k.cat(c, cat)
			v := metrics.FormatMicros(pc.Mean) + " " + share(pc.Mean, total)
			if b != nil {
				if bp, ok := k.cat(b, cat); ok && !(bp.Mean == 0 && pc.Mean == 0) {
					v += " " + deltaText(bp.Mean, pc.Mean)
					if mark != nil {
						if mk := mark(c, cat, bp.Mean, pc.Mean); mk != "" {
							v += " " + mk
						}
					}
				}
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// pathDetail is the per-cell p50 and p90 of each category of pathTable's
// columns: a header row, then one row per cell.
func pathDetail(k pathKind, cells []*results.Cell, lab labeler) [][]string {
	cols := pathColumns(k, cells)
	rows := [][]string{append([]string{"cell"}, cols...)}
	for _, c := range cells {
		row := []string{lab.label(c)}
		for _, cat := range cols {
			pc, _ := k.cat(c, cat)
			row = append(row, fmtUS(pc.P50)+" / "+fmtUS(pc.P90))
		}
		rows = append(rows, row)
	}
	return rows
}

// pathNote explains the table under its title.
const pathNote = "each finished run's TTLS split along its critical path: per category the mean per run and its share of " +
	"TTLS mean*, the TTLS mean of the finished runs (a run's categories add up exactly to its TTLS; docs/critical-path.md)"

// tailNote explains the table of the path to completion under its title.
const tailNote = "for the cells whose runs are recorded done well after their last step (TTC mean* ≥ 1.1 × TTLS mean*) " +
	"or that report no TTLS, each finished run's TTC split along its path back from its terminal event: per category the mean " +
	"per run and its share of TTC mean*, the TTC mean of the finished runs (docs/critical-path.md#the-path-to-completion)"

// pathCostNote follows the table of a group with a cell of the built-in
// engine on mem: there the spans' recording is a measurable part of every
// run it measures (docs/critical-path.md, Cost), where on sim it is none
// and on NATS or PostgreSQL within noise.
const pathCostNote = "on mem, recording the spans is part of each run's times: a 256-branch run's TTLS +6–12% on 2 cores where the engine's own work is the run's time, +1–3% where it waits " +
	"(BenchmarkSpansMem256, docs/critical-path.md#cost); sweep --spans off measures mem without it"

// onMem reports whether a cell of cells ran the built-in engine on mem in
// real time (f's: a sweep on the sim world's virtual clock pays nothing
// for its recording).
func onMem(f *results.File, cells []*results.Cell) bool {
	return !f.VirtualTime && slices.ContainsFunc(cells, func(c *results.Cell) bool { return c.Target == "" && c.World == "mem" })
}

// pathOffNote stands for the table of a sweep that recorded no spans.
const pathOffNote = "not recorded (sweep --spans off: the engine's calls were not timed, and no cell has a critical path)"

// hasTTLS reports whether a cell of cells reports TTLS (would have a
// critical path had spans been recorded).
func hasTTLS(cells []*results.Cell) bool {
	for _, c := range cells {
		if _, ok := c.Metrics["ttls"]; ok {
			return true
		}
	}
	return false
}

// writePathText writes the group's "where the time went" table for the
// terminal, after a blank line, the cell column padded to width (changes
// against a baseline are compare's: durabench compare tests each
// category's).
func writePathText(w io.Writer, f *results.File, cells []*results.Cell, lab labeler, width int) error {
	pc := pathCells(cells)
	if len(pc) == 0 && f.Plan.NoSpans() && hasTTLS(cells) {
		fmt.Fprintln(w, "\nwhere the time went: "+pathOffNote)
	}
	if len(pc) > 0 {
		fmt.Fprintln(w, "\nwhere the time went: "+pathNote)
		if err := writePathRows(w, pathTable(ttlsPath, pc, lab, nil, nil), width); err != nil {
			return err
		}
	}
	if tc := tailCells(cells); len(tc) > 0 {
		fmt.Fprintln(w, "\nwhere the time to completion went: "+tailNote)
		if err := writePathRows(w, pathTable(ttcPath, tc, lab, nil, nil), width); err != nil {
			return err
		}
	}
	if len(pc) > 0 && onMem(f, pc) {
		_, err := fmt.Fprintln(w, "\nnote: "+pathCostNote)
		return err
	}
	return nil
}

// writePathRows writes a path table's rows aligned, the cell column padded
// to width.
func writePathRows(w io.Writer, rows [][]string, width int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, row := range rows {
		if i > 0 {
			row[0] += strings.Repeat(" ", max(0, width-utf8.RuneCountInString(row[0])))
		} else {
			row[0] += strings.Repeat(" ", max(0, width-4))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// compactPath is a critical path without its per-run values (the
// summaries the next comment's deltas need), for the embedded copy.
func compactPath(path []results.PathCategory) []results.PathCategory {
	if path == nil {
		return nil
	}
	out := make([]results.PathCategory, len(path))
	for i, pc := range path {
		pc.Values = nil
		out[i] = pc
	}
	return out
}

// pathMarkdown writes the group's "where the time went" table (at most
// d.maxRows rows when set) and, with histograms, each cell's categories
// with their p50 and p90, collapsed; then, for the cells whose runs are
// recorded done well after their last step (tailCells), the same for
// their path to completion.
func (m *markdown) pathMarkdown(sb *strings.Builder, g scenarioGroup, d detail) {
	pc := pathCells(g.Cells)
	if len(pc) == 0 && m.f.Plan.NoSpans() && hasTTLS(g.Cells) {
		sb.WriteString("\n**Where the time went** — " + pathOffNote + ".\n")
	}
	if len(pc) > 0 {
		sb.WriteString("\n**Where the time went** — " + pathNote + ":\n\n")
		m.pathKindMarkdown(sb, ttlsPath, pc, d)
	}
	if tc := tailCells(g.Cells); len(tc) > 0 {
		sb.WriteString("\n**Where the time to completion went** — " + tailNote + ":\n\n")
		m.pathKindMarkdown(sb, ttcPath, tc, d)
	}
}

// pathKindMarkdown writes the table of k's path for cells, its notes and
// (with histograms) its per-category p50 and p90.
func (m *markdown) pathKindMarkdown(sb *strings.Builder, k pathKind, pc []*results.Cell, d detail) {
	omitted := 0
	if d.maxRows > 0 && len(pc) > d.maxRows {
		pc, omitted = pc[:d.maxRows], len(pc)-d.maxRows
	}
	base := m.base
	if !m.comparable {
		base = nil
	}
	// The marks of the main tables: a large change that compare's per-run
	// test finds significant, or noise.
	mark := func(c *results.Cell, cat string, b, cur float64) string {
		sig, ok := m.sig[sigKey{cellKey(c), k.prefix + cat}]
		switch {
		case ok && !sig.Significant:
			return markNoise
		case !ok || sig.Significant:
			return deltaMark(b, cur)
		}
		return ""
	}
	writeMarkdownRows(sb, pathTable(k, pc, m.lab, base, mark))
	if omitted > 0 {
		fmt.Fprintf(sb, "\n_%d more row(s) left out to fit the comment; see the uploaded results._\n", omitted)
	}
	if k.metric == ttlsPath.metric && onMem(m.f, pc) {
		sb.WriteString("\n_" + pathCostNote + "._\n")
	}
	if !d.histograms {
		return
	}
	what := "critical path"
	if k.metric == ttcPath.metric {
		what = "path to completion"
	}
	sb.WriteString("\n<details><summary>" + what + " per category: p50 / p90 per run</summary>\n\n")
	writeMarkdownRows(sb, pathDetail(k, pc, m.lab))
	sb.WriteString("\n</details>\n")
}

// writeMarkdownRows writes a table's rows, its cells' labels as code.
func writeMarkdownRows(sb *strings.Builder, rows [][]string) {
	for i, row := range rows {
		if i > 0 {
			row[0] = "`" + row[0] + "`"
		}
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
}
