package reporters

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Stream cells (those with chunk round trips) get the SDK suite's per-chunk
// view next to the usual tables: CRTT by index bucket with each run's
// delay variation, writer slip and steady rates (crttTable), CRTT by chunk
// size for a size sweep (crttSizes), and mean CRTT over stream progress
// (the crtt-progress chart).

// streamCells returns the cells of g that read stream chunks.
func streamCells(cells []*results.Cell) []*results.Cell {
	var out []*results.Cell
	for _, c := range cells {
		if _, ok := c.Metrics[metrics.CRTTFirst]; ok {
			out = append(out, c)
		}
	}
	return out
}

// crttColumns are the CRTT table's columns after the cell: a metric and the
// summary of it each shows.
var crttColumns = []struct {
	metric, head string
	pick         func(results.Metric) int64
}{
	{metrics.CRTTFirst, "CRTT 0 p50", func(m results.Metric) int64 { return m.P50 }},
	{metrics.CRTTEarly, "CRTT 1–20 p50", func(m results.Metric) int64 { return m.P50 }},
	{metrics.CRTTLate, "CRTT 21+ p50", func(m results.Metric) int64 { return m.P50 }},
	{metrics.CRTTLate, "CRTT 21+ p99", func(m results.Metric) int64 { return m.P99 }},
	{metrics.CDV, "CDV p50", func(m results.Metric) int64 { return m.P50 }},
	{metrics.CDV, "CDV max", func(m results.Metric) int64 { return m.Max }},
	{metrics.WriteSlip, "write slip max", func(m results.Metric) int64 { return m.Max }},
	{metrics.ReadRate, "read µs/KiB p50", func(m results.Metric) int64 { return m.P50 }},
	{metrics.WriteRate, "write µs/KiB p50", func(m results.Metric) int64 { return m.P50 }},
}

// crttTable is the CRTT-by-bucket table of stream cells: a header row, then
// one row per cell ("-" where a cell has no sample).
func crttTable(cells []*results.Cell, lab labeler) [][]string {
	head := []string{"cell"}
	for _, col := range crttColumns {
		head = append(head, col.head)
	}
	rows := [][]string{head}
	for _, c := range cells {
		row := []string{lab.label(c)}
		for _, col := range crttColumns {
			if m, ok := c.Metrics[col.metric]; ok && m.Count > 0 {
				row = append(row, fmtUS(col.pick(m)))
			} else {
				row = append(row, "-")
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// sizeSweep reports whether c is a stream cell of a size sweep with two
// chunk sizes or more.
func sizeSweep(c *results.Cell) bool {
	return len(c.CRTTBySize) >= 2 && (c.Scenario == "stream-sizes" || c.Options["sizes"] != "")
}

// crttSizes is one line per cell of a size sweep: mean CRTT per chunk
// size; none for cells with one size.
func crttSizes(cells []*results.Cell, lab labeler) []string {
	var out []string
	for _, c := range cells {
		if !sizeSweep(c) {
			continue
		}
		parts := make([]string, len(c.CRTTBySize))
		for i, b := range c.CRTTBySize {
			parts[i] = fmt.Sprintf("%s %s (n=%d)", sizeLabel(b.Key), fmtUS(int64(b.MeanUS)), b.Count)
		}
		out = append(out, lab.label(c)+": "+strings.Join(parts, " · "))
	}
	return out
}

// cadenceLines names each replayed cadence by its SHA-256, once.
func cadenceLines(cells []*results.Cell) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cells {
		if c.CadenceSHA256 == "" || seen[c.CadenceSHA256] {
			continue
		}
		seen[c.CadenceSHA256] = true
		name := c.Options["cadence"]
		if name == "" {
			name = "(the default)"
		}
		out = append(out, fmt.Sprintf("cadence %s: sha256 %s", name, c.CadenceSHA256))
	}
	return out
}

// crttProgress is the chart of mean CRTT over stream progress: one line per
// stream cell of g, x the tenth of the stream (its middle), y the mean
// round trip of the chunks in it, pooled over the cell's runs.
func (c *charts) crttProgress(g scenarioGroup) (*plot.Plot, error) {
	cells := streamCells(g.Cells)
	var withBins []*results.Cell
	for _, cell := range cells {
		if len(cell.CRTTProgress) > 0 {
			withBins = append(withBins, cell)
		}
	}
	if len(withBins) == 0 {
		return nil, nil
	}
	p := c.newPlot("mean chunk round trip over the stream — "+g.Name, "stream progress (chunk index / chunks, %)", "mean CRTT")
	p.Y.Tick.Marker = axisTicks{ms: true}
	p.Legend.Left = false
	for i, cell := range withBins {
		pts := make(plotter.XYs, 0, len(cell.CRTTProgress))
		for _, b := range cell.CRTTProgress {
			pts = append(pts, plotter.XY{X: float64(b.Key)*100/metrics.ProgressBins + 100/metrics.ProgressBins/2, Y: b.MeanUS / 1000})
		}
		if err := c.addCellLine(p, i, cell, pts); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.X.Max = 0, 100
	p.Y.Min = 0
	return p, nil
}

// addCellLine adds a cell's line with its points to p, in the i-th palette
// colour, with the cell's label in the legend.
func (c *charts) addCellLine(p *plot.Plot, i int, cell *results.Cell, pts plotter.XYs) error {
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	col := palette[i%len(palette)]
	line.LineStyle = headStyle(col)
	points.Shape = draw.CircleGlyph{}
	points.Color = col
	points.Radius = 3
	p.Add(line, points)
	p.Legend.Add(c.lab.label(cell), line, points)
	return nil
}

// sizeLabel spells a chunk size as the size sweep's option does.
func sizeLabel(n int) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// crttBySize is the chart of mean CRTT by chunk size for a size sweep: one
// line per cell with two sizes or more, x the chunk size (log scale).
func (c *charts) crttBySize(g scenarioGroup) (*plot.Plot, error) {
	var cells []*results.Cell
	for _, cell := range streamCells(g.Cells) {
		if sizeSweep(cell) {
			cells = append(cells, cell)
		}
	}
	if len(cells) == 0 {
		return nil, nil
	}
	p := c.newPlot("mean chunk round trip by chunk size — "+g.Name, "chunk size (bytes, log scale)", "mean CRTT")
	p.Y.Tick.Marker = axisTicks{ms: true}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Legend.Left = false
	lo, hi := math.Inf(1), 0.0
	for i, cell := range cells {
		pts := make(plotter.XYs, 0, len(cell.CRTTBySize))
		for _, b := range cell.CRTTBySize {
			x := math.Max(float64(b.Key), 1)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			pts = append(pts, plotter.XY{X: x, Y: b.MeanUS / 1000})
		}
		if err := c.addCellLine(p, i, cell, pts); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	p.Y.Min = 0
	return p, nil
}

// sizeTicks labels a log axis of byte sizes at powers of 4 from 1 B.
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1.0; v <= max; v *= 4 {
		if v >= min {
			ts = append(ts, plot.Tick{Value: v, Label: sizeLabel(int(v))})
		}
	}
	return ts
}
