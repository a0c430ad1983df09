package reporters

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Text writes a compact terminal table per scenario: for each cell its runs,
// the p50/p90/p99/max of the scenario's headline metric (TTLS for fan-outs),
// the p50 and p99 of TTFS, those of driver lag (open pacing), and its
// stalls and errors (and its world
// incidents, in a column of their own when any cell of the scenario had
// some). A cell whose driver lag p99 is over DriverLagShare of its TTFS
// p50 gets a warning line under the table, and so does a cell the cell
// timeout ended with runs unfinished or never started. With a baseline of
// the same methodology, the headline p50 carries its change against the
// baseline's matching cell.
func Text(w io.Writer, f *results.File, opt Options) error {
	ew := &errWriter{w: w}
	if f.Partial {
		fmt.Fprintf(ew, "PARTIAL RESULTS: the sweep did not finish every planned cell")
		if f.Error != "" {
			fmt.Fprintf(ew, " (%s)", f.Error)
		}
		fmt.Fprintln(ew)
		for _, label := range f.Missing {
			fmt.Fprintln(ew, "  missing: "+label)
		}
	}
	if f.VirtualTime {
		fmt.Fprintln(ew, "virtual time: every figure is simulated time (sim world), not wall-clock")
	}
	var base map[stats.CellKey]*results.Cell
	if opt.Baseline != nil && opt.Baseline.Methodology == f.Methodology {
		base = cellIndex(opt.Baseline) // other methodologies are never compared
	}
	lab := newLabeler(f)
	for gi, g := range groupScenarios(f) {
		// tabwriter aligns every column the same way; padding the labels
		// keeps the cell column left-aligned while numbers align right.
		width := 0
		for _, c := range g.Cells {
			width = max(width, utf8.RuneCountInString(lab.label(c)))
		}
		if gi > 0 || f.Partial || f.VirtualTime {
			fmt.Fprintln(ew)
		}
		head := headlineMetric(g.Cells)
		_, hasTTFS := firstMetric(g.Cells, "ttfs")
		fmt.Fprintf(ew, "%s\n", g.Name)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		cols := []string{"cell" + strings.Repeat(" ", max(0, width-4)), "runs"}
		if head != "" {
			t := metricTitle(head)
			cols = append(cols, t+" p50", "p90", "p99", "max")
		}
		if hasTTFS && head != "ttfs" {
			cols = append(cols, "TTFS p50", "p99")
		}
		hasLag := hasDriverLag(g.Cells)
		if hasLag {
			cols = append(cols, "lag p50", "p99")
		}
		cols = append(cols, "stalls", "errors")
		hasIncidents := false
		for _, c := range g.Cells {
			hasIncidents = hasIncidents || c.WorldIncidents != nil && c.WorldIncidents.Total() > 0
		}
		if hasIncidents {
			cols = append(cols, "world incidents")
		}
		hasAnomalies := slices.ContainsFunc(g.Cells, func(c *results.Cell) bool { return c.Anomalies > 0 })
		if hasAnomalies {
			cols = append(cols, "anomalies")
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
		for _, c := range g.Cells {
			l := lab.label(c)
			row := []string{l + strings.Repeat(" ", width-utf8.RuneCountInString(l)), strconv.Itoa(c.Runs)}
			if head != "" {
				m, ok := c.Metrics[head]
				if ok && m.Count > 0 {
					p50 := metrics.FormatMicros(float64(m.P50))
					if b := base[cellKey(c)]; b != nil {
						if bm, ok := b.Metrics[head]; ok && bm.Count > 0 {
							p50 += " " + deltaText(float64(bm.P50), float64(m.P50))
						}
					}
					row = append(row, p50, fmtUS(m.P90), fmtUS(m.P99), fmtUS(m.Max))
				} else {
					row = append(row, "-", "-", "-", "-")
				}
			}
			if hasTTFS && head != "ttfs" {
				if m, ok := c.Metrics["ttfs"]; ok && m.Count > 0 {
					row = append(row, fmtUS(m.P50), fmtUS(m.P99))
				} else {
					row = append(row, "-", "-")
				}
			}
			if hasLag {
				if m := c.DriverLag; m != nil && m.Count > 0 {
					row = append(row, fmtUS(m.P50), fmtUS(m.P99))
				} else {
					row = append(row, "-", "-")
				}
			}
			row = append(row, strconv.Itoa(c.Stalls), strconv.Itoa(c.Errors))
			if hasIncidents {
				n := int64(0)
				if c.WorldIncidents != nil {
					n = c.WorldIncidents.Total()
				}
				row = append(row, strconv.FormatInt(n, 10))
			}
			if hasAnomalies {
				row = append(row, strconv.Itoa(c.Anomalies))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		// A skipped cell's row has no figure; why it has none, once per
		// reason.
		var reasons []string
		for _, c := range g.Cells {
			if c.Skipped != "" && !slices.Contains(reasons, c.Skipped) {
				reasons = append(reasons, c.Skipped)
			}
		}
		for _, r := range reasons {
			fmt.Fprintln(ew, "  skipped (the rows with 0 runs): "+r)
		}
		for _, l := range append(cutWarnings(f, g.Cells, lab), lagWarnings(g.Cells, lab)...) {
			fmt.Fprintln(ew, "  warning: "+l)
		}
		if err := writePathText(ew, f, g.Cells, lab, width); err != nil {
			return err
		}
		if sc := streamCells(g.Cells); len(sc) > 0 {
			fmt.Fprintln(ew, "chunk round trips (CRTT) by chunk index")
			tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
			for i, row := range crttTable(sc, lab) {
				if i > 0 {
					row[0] += strings.Repeat(" ", width-utf8.RuneCountInString(row[0]))
				} else {
					row[0] += strings.Repeat(" ", max(0, width-4))
				}
				fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, l := range crttSizes(sc, lab) {
				fmt.Fprintln(ew, "CRTT by chunk size, "+l)
			}
			for _, l := range cadenceLines(sc) {
				fmt.Fprintln(ew, l)
			}
		}
	}
	return ew.err
}

// firstMetric returns the first of cells' metric name and whether any has it.
func firstMetric(cells []*results.Cell, name string) (results.Metric, bool) {
	for _, c := range cells {
		if m, ok := c.Metrics[name]; ok {
			return m, true
		}
	}
	return results.Metric{}, false
}

func fmtUS(us int64) string { return metrics.FormatMicros(float64(us)) }

// errWriter keeps the first write error so a report's many small writes need
// one check at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
