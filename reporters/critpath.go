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
// and as stacked bars in the critical-path chart (pngpath.go).

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

// pathColumns are the categories shown for cells: those with a mean above
// zero in one of them, and unattributed, in report order.
func pathColumns(cells []*results.Cell) []string {
	var out []string
	for _, def := range metrics.Categories {
		show := def.Name == metrics.CatUnattributed
		for _, c := range cells {
			if pc, ok := c.Path(def.Name); ok && pc.Mean > 0 {
				show = true
			}
		}
		if show {
			out = append(out, def.Name)
		}
	}
	return out
}

// pathTotal is the sum of a cell's category means: the TTLS mean of its
// finished runs.
func pathTotal(c *results.Cell) float64 {
	var s float64
	for _, pc := range c.CriticalPath {
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

// pathTable is the "where the time went" table: a header row, then one
// row per cell: its label, the TTLS mean of its finished runs, and per
// category the mean per run and its share of that TTLS. With base, a
// category's mean carries its change against the baseline's cell, and
// mark's verdict on it (nil: none).
func pathTable(cells []*results.Cell, lab labeler, base map[stats.CellKey]*results.Cell,
	mark func(c *results.Cell, cat string, base, cur float64) string) [][]string {
	cols := pathColumns(cells)
	head := []string{"cell", "TTLS mean*"}
	head = append(head, cols...)
	rows := [][]string{head}
	for _, c := range cells {
		total := pathTotal(c)
		row := []string{lab.label(c), metrics.FormatMicros(total)}
		b := base[cellKey(c)]
		for _, cat := range cols {
			pc, _ := c.Path(cat)
			v := metrics.FormatMicros(pc.Mean) + " " + share(pc.Mean, total)
			if b != nil {
				if bp, ok := b.Path(cat); ok && !(bp.Mean == 0 && pc.Mean == 0) {
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
func pathDetail(cells []*results.Cell, lab labeler) [][]string {
	cols := pathColumns(cells)
	rows := [][]string{append([]string{"cell"}, cols...)}
	for _, c := range cells {
		row := []string{lab.label(c)}
		for _, cat := range cols {
			pc, _ := c.Path(cat)
			row = append(row, fmtUS(pc.P50)+" / "+fmtUS(pc.P90))
		}
		rows = append(rows, row)
	}
	return rows
}

// pathNote explains the table under its title.
const pathNote = "each finished run's TTLS split along its critical path: per category the mean per run and its share of " +
	"TTLS mean*, the TTLS mean of the finished runs (a run's categories add up exactly to its TTLS; docs/critical-path.md)"

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
	if len(pc) == 0 {
		if f.Plan.NoSpans() && hasTTLS(cells) {
			fmt.Fprintln(w, "\nwhere the time went: "+pathOffNote)
		}
		return nil
	}
	fmt.Fprintln(w, "\nwhere the time went: "+pathNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, row := range pathTable(pc, lab, nil, nil) {
		if i > 0 {
			row[0] += strings.Repeat(" ", max(0, width-utf8.RuneCountInString(row[0])))
		} else {
			row[0] += strings.Repeat(" ", max(0, width-4))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if onMem(f, pc) {
		_, err := fmt.Fprintln(w, "\nnote: "+pathCostNote)
		return err
	}
	return nil
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
// with their p50 and p90, collapsed.
func (m *markdown) pathMarkdown(sb *strings.Builder, g scenarioGroup, d detail) {
	pc := pathCells(g.Cells)
	if len(pc) == 0 {
		if m.f.Plan.NoSpans() && hasTTLS(g.Cells) {
			sb.WriteString("\n**Where the time went** — " + pathOffNote + ".\n")
		}
		return
	}
	omitted := 0
	if d.maxRows > 0 && len(pc) > d.maxRows {
		pc, omitted = pc[:d.maxRows], len(pc)-d.maxRows
	}
	detail := d.histograms
	sb.WriteString("\n**Where the time went** — " + pathNote + ":\n\n")
	base := m.base
	if !m.comparable {
		base = nil
	}
	// The marks of the main tables: a large change that compare's per-run
	// test finds significant, or noise.
	mark := func(c *results.Cell, cat string, b, cur float64) string {
		sig, ok := m.sig[sigKey{cellKey(c), metrics.PathMetricPrefix + cat}]
		switch {
		case ok && !sig.Significant:
			return markNoise
		case !ok || sig.Significant:
			return deltaMark(b, cur)
		}
		return ""
	}
	for i, row := range pathTable(pc, m.lab, base, mark) {
		if i > 0 {
			row[0] = "`" + row[0] + "`"
		}
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
	if omitted > 0 {
		fmt.Fprintf(sb, "\n_%d more row(s) left out to fit the comment; see the uploaded results._\n", omitted)
	}
	if onMem(m.f, pc) {
		sb.WriteString("\n_" + pathCostNote + "._\n")
	}
	if !detail {
		return
	}
	sb.WriteString("\n<details><summary>critical path per category: p50 / p90 per run</summary>\n\n")
	for i, row := range pathDetail(pc, m.lab) {
		if i > 0 {
			row[0] = "`" + row[0] + "`"
		}
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
	sb.WriteString("\n</details>\n")
}
