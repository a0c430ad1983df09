package reporters

import (
	"fmt"
	"io"
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
// category's mean carries its change against the baseline's cell.
func pathTable(cells []*results.Cell, lab labeler, base map[stats.CellKey]*results.Cell) [][]string {
	cols := pathColumns(cells)
	head := []string{"cell", "TTLS mean*"}
	head = append(head, cols...)
	rows := [][]string{head}
	for _, c := range cells {
		total := pathTotal(c)
		row := []string{lab.label(c), stats.FormatMicros(total)}
		b := base[cellKey(c)]
		for _, cat := range cols {
			pc, _ := c.Path(cat)
			v := stats.FormatMicros(pc.Mean) + " " + share(pc.Mean, total)
			if b != nil {
				if bp, ok := b.Path(cat); ok && !(bp.Mean == 0 && pc.Mean == 0) {
					v += " " + deltaText(bp.Mean, pc.Mean)
				}
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// pathDetail is the per-cell, per-category mean, p50 and p90 (rows with
// time in them only): a header row, then the rows.
func pathDetail(cells []*results.Cell, lab labeler) [][]string {
	rows := [][]string{{"cell", "category", "mean", "p50", "p90", "share"}}
	for _, c := range cells {
		total := pathTotal(c)
		for _, pc := range c.CriticalPath {
			if pc.Mean <= 0 && pc.Category != metrics.CatUnattributed {
				continue
			}
			rows = append(rows, []string{lab.label(c), pc.Category, stats.FormatMicros(pc.Mean),
				fmtUS(pc.P50), fmtUS(pc.P90), share(pc.Mean, total)})
		}
	}
	return rows
}

// pathNote explains the table under its title.
const pathNote = "each finished run's TTLS split along its critical path: per category the mean per run and its share of " +
	"TTLS mean*, the TTLS mean of the finished runs (a run's categories add up exactly to its TTLS; docs/critical-path.md)"

// writePathText writes the group's "where the time went" table for the
// terminal, the cell column padded to width.
func writePathText(w io.Writer, cells []*results.Cell, lab labeler, width int, base map[stats.CellKey]*results.Cell) error {
	pc := pathCells(cells)
	if len(pc) == 0 {
		return nil
	}
	fmt.Fprintln(w, "where the time went: "+pathNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, row := range pathTable(pc, lab, base) {
		if i > 0 {
			row[0] += strings.Repeat(" ", max(0, width-utf8.RuneCountInString(row[0])))
		} else {
			row[0] += strings.Repeat(" ", max(0, width-4))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// pathMarkdown writes the group's "where the time went" table and, with
// detail, each cell's categories with their p50 and p90, collapsed.
func (m *markdown) pathMarkdown(sb *strings.Builder, g scenarioGroup, detail bool) {
	pc := pathCells(g.Cells)
	if len(pc) == 0 {
		return
	}
	sb.WriteString("\n**Where the time went** — " + pathNote + ":\n\n")
	base := m.base
	if !m.comparable {
		base = nil
	}
	for i, row := range pathTable(pc, m.lab, base) {
		if i > 0 {
			row[0] = "`" + row[0] + "`"
		}
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
	if !detail {
		return
	}
	sb.WriteString("\n<details><summary>critical path per category: mean, p50, p90</summary>\n\n")
	for i, row := range pathDetail(pc, m.lab) {
		if i > 0 {
			row[0], row[1] = "`"+row[0]+"`", "`"+row[1]+"`"
		}
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---|---" + strings.Repeat("|--:", len(row)-2) + "|\n")
		}
	}
	sb.WriteString("\n</details>\n")
}
