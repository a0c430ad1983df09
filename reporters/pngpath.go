package reporters

import (
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/durabench/durabench/metrics"
)

// categoryColour is each critical-path category's colour in the chart:
// the network and the backend in blues and reds, the engine's own time in
// purple, what is not the engine's (driver lag, bodies) in greys and
// yellow, unattributed in a pale grey so that a gap is seen.
var categoryColour = map[string]color.Color{
	metrics.CatDriverLag:    color.RGBA{120, 120, 120, 255},
	metrics.CatStart:        color.RGBA{180, 160, 0, 255},
	metrics.CatQueueWait:    color.RGBA{0, 114, 178, 255},
	metrics.CatLogLoad:      color.RGBA{230, 159, 0, 255},
	metrics.CatWrite:        color.RGBA{213, 94, 0, 255},
	metrics.CatPublish:      color.RGBA{0, 158, 115, 255},
	metrics.CatRunRead:      color.RGBA{86, 180, 233, 255},
	metrics.CatCompute:      color.RGBA{204, 121, 167, 255},
	metrics.CatBody:         color.RGBA{240, 228, 66, 255},
	metrics.CatContention:   color.RGBA{60, 20, 20, 255},
	metrics.CatUnattributed: color.RGBA{215, 215, 215, 255},
}

// criticalPath is the chart of where the time went in a scenario's cells:
// one horizontal bar per cell, its mean TTLS (of the finished runs), split
// into the categories' means in report order, stacked from the left. Nil
// when no cell of the group has a critical path.
func (c *charts) criticalPath(g scenarioGroup) (*plot.Plot, error) {
	cells := pathCells(g.Cells)
	if len(cells) == 0 {
		return nil, nil
	}
	p := c.newPlot(g.Name+": where the time went (critical path, mean per run)", "mean time on the critical path", "")
	p.X.Tick.Marker = axisTicks{ms: true} // 0, 5s, 10s, 15s: as every latency axis
	p.Legend.Top, p.Legend.Left = false, false
	// The first cell at the top, as in the tables.
	rev := slices.Clone(cells)
	slices.Reverse(rev)
	labels := make([]string, len(rev))
	for i, cell := range rev {
		labels[i] = c.lab.label(cell)
	}
	width := vg.Points(min(28, 360/float64(len(rev))))
	var below *plotter.BarChart
	for _, cat := range pathColumns(ttlsPath, cells) {
		vals := make(plotter.Values, len(rev))
		for i, cell := range rev {
			pc, _ := cell.Path(cat)
			vals[i] = pc.Mean / 1000 // µs -> ms
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.Color = categoryColour[cat]
		bars.LineStyle = draw.LineStyle{Color: color.White, Width: vg.Points(0.4)}
		if below != nil {
			bars.StackOn(below)
		}
		below = bars
		p.Add(bars)
		p.Legend.Add(cat, bars)
	}
	p.NominalY(labels...)
	p.X.Min = 0
	var most float64
	for _, cell := range cells {
		most = max(most, pathTotal(ttlsPath, cell))
	}
	p.X.Max = most / 1000 * 1.04 // room right of the longest bar
	p.Y.Tick.Label.Font.Size = 10
	return p, nil
}
