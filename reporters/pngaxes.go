package reporters

import (
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// linearTicks puts labelled ticks on a linear axis at the 1-2-5 step that
// gives between 4 and 8 labels over [min, max] (at least 1 for counts, where
// fractional steps mean nothing), with four or five unlabelled ticks between
// each pair. plot.DefaultTicks often labels only two or three values (0 and
// 250 ms): too few to read a line's value off the axis.
func linearTicks(min, max float64, integer bool) []plot.Tick {
	if !(max > min) || math.IsInf(min, 0) || math.IsInf(max, 0) {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	step := step125((max-min)/8, integer)
	// Fewer than 4 labels at that step: the next step down. Labels, not
	// intervals, are counted — 0 to 18 s at 5 s names 0, 5, 10 and 15 s;
	// counting its 3.6 intervals took 2 s steps and 10 labels.
	labels := func(step float64) float64 { return math.Floor(max/step+1e-9) - math.Ceil(min/step-1e-9) + 1 }
	if labels(step) < 4 && !(integer && step == 1) {
		step = smallerStep(step)
	}
	minor := step / 5
	if m := step / math.Pow(10, math.Floor(math.Log10(step))); math.Round(m) == 2 {
		minor = step / 4
	}
	if integer && minor < 1 {
		minor = 0
	}
	var ts []plot.Tick
	// Labelled ticks first, then the minor ones between them: computed from
	// the integer multiples so that 0.1+0.2 never prints as 0.30000000000000004.
	for i := math.Ceil(min/step - 1e-9); i*step <= max+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // never "-0"
		}
		ts = append(ts, plot.Tick{Value: v, Label: "x"})
	}
	if minor > 0 {
		for i := math.Ceil(min/minor - 1e-9); i*minor <= max+minor*1e-9; i++ {
			v := i * minor
			if r := math.Abs(v/step - math.Round(v/step)); r > 1e-6 {
				ts = append(ts, plot.Tick{Value: v})
			}
		}
	}
	return ts
}

// step125 is the smallest 1, 2 or 5 × 10ⁿ at least raw (at least 1 when
// integer): niceStep's rule for axes, where steps under 1 are allowed.
func step125(raw float64, integer bool) float64 {
	if integer && raw <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// smallerStep is the 1-2-5 step below step.
func smallerStep(step float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(step)+1e-9))
	switch m := math.Round(step / p); m {
	case 1:
		return p / 2
	case 2:
		return p
	default:
		return 2 * p
	}
}

// logTicks labels 1, 2 and 5 × 10ⁿ on a log axis (only 1 × 10ⁿ when the
// axis spans more than four decades, where 1-2-5 would crowd it) with
// unlabelled ticks at the other integers × 10ⁿ. An axis spanning less than
// one step between labels also gets 3 × 10ⁿ labelled, so that at least two
// values are always named.
func logTicks(min, max float64) []plot.Tick {
	decades := math.Log10(max / min)
	labelled := []float64{1, 2, 5}
	switch {
	case decades > 4:
		labelled = []float64{1}
	case decades < 0.7:
		labelled = []float64{1, 2, 3, 5}
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)) - 1; e <= math.Ceil(math.Log10(max))+1; e++ {
		for _, m := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9} {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			tk := plot.Tick{Value: v}
			if slices.Contains(labelled, m) {
				tk.Label = "x"
			}
			ts = append(ts, tk)
		}
	}
	return ts
}

// endLabel is one line's name and value, written right of its last point.
type endLabel struct {
	y     float64 // data value the label belongs to
	text  string
	style draw.TextStyle
}

// endLabels is a plotter that writes labels at x, each as close to its
// value's height as it can be without overlapping another: the placement
// happens when the chart is drawn, in canvas units, so it knows the data
// area's real height and each label's real height. It has no DataRange, so
// the labels never widen an axis.
type endLabels struct {
	x      float64
	labels []endLabel
}

// GlyphBoxes implements plot.GlyphBoxer: a box as wide as each label from
// x (and no height), so the plot narrows its data area until every label
// ends inside the canvas, never under a legend beside it.
func (e *endLabels) GlyphBoxes(plt *plot.Plot) []plot.GlyphBox {
	var boxes []plot.GlyphBox
	for _, l := range e.labels {
		boxes = append(boxes, plot.GlyphBox{
			X:         plt.X.Norm(e.x),
			Y:         plt.Y.Norm(l.y),
			Rectangle: vg.Rectangle{Max: vg.Point{X: l.style.Width(l.text) + vg.Points(4)}},
		})
	}
	return boxes
}

// Plot implements plot.Plotter.
func (e *endLabels) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	want := make([]vg.Length, len(e.labels))
	heights := make([]vg.Length, len(e.labels))
	for i, l := range e.labels {
		want[i] = trY(l.y)
		heights[i] = l.style.Height(l.text) * 1.1
	}
	pos := spreadLabels(want, heights, c.Min.Y, c.Max.Y)
	for i, l := range e.labels {
		c.FillText(l.style, vg.Point{X: trX(e.x), Y: pos[i]}, l.text)
	}
}

// spreadLabels returns centre positions for labels of the given heights
// that want to sit at want: every pair at least their mean height apart, all
// within [lo, hi] when they fit, each moved as little as the others allow.
// Overlapping labels are merged into a block centred on the mean of what
// they want, blocks that then overlap merge again, and a block past either
// end slides back inside.
func spreadLabels(want, heights []vg.Length, lo, hi vg.Length) []vg.Length {
	n := len(want)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case want[a] < want[b]:
			return -1
		case want[a] > want[b]:
			return 1
		}
		return 0
	})
	// A block is a run of labels (in order) stacked edge to edge: its
	// bottom edge and total height.
	type block struct {
		first, last int // indexes into order
		bottom, h   vg.Length
		sum         vg.Length // sum over members of (want - offset of its centre)
	}
	var blocks []block
	for k, i := range order {
		b := block{first: k, last: k, h: heights[i], sum: want[i] - heights[i]/2}
		b.bottom = b.sum
		blocks = append(blocks, b)
		for len(blocks) > 1 {
			top, below := blocks[len(blocks)-1], blocks[len(blocks)-2]
			if below.bottom+below.h <= top.bottom {
				break
			}
			// Merge: the block's bottom is the mean of what each member's
			// placement asks of it.
			m := block{first: below.first, last: top.last, h: below.h + top.h}
			off := vg.Length(0)
			for j := m.first; j <= m.last; j++ {
				idx := order[j]
				m.sum += want[idx] - off - heights[idx]/2
				off += heights[idx]
			}
			m.bottom = m.sum / vg.Length(m.last-m.first+1)
			blocks = append(blocks[:len(blocks)-2], m)
		}
	}
	// Slide the stack inside [lo, hi]: from the top down, then from the
	// bottom up (a stack taller than the area keeps its bottom in view).
	for i := len(blocks) - 1; i >= 0; i-- {
		limit := hi
		if i < len(blocks)-1 {
			limit = blocks[i+1].bottom
		}
		if blocks[i].bottom+blocks[i].h > limit {
			blocks[i].bottom = limit - blocks[i].h
		}
	}
	for i := range blocks {
		limit := lo
		if i > 0 {
			limit = blocks[i-1].bottom + blocks[i-1].h
		}
		if blocks[i].bottom < limit {
			blocks[i].bottom = limit
		}
	}
	pos := make([]vg.Length, n)
	for _, b := range blocks {
		y := b.bottom
		for j := b.first; j <= b.last; j++ {
			idx := order[j]
			pos[idx] = y + heights[idx]/2
			y += heights[idx]
		}
	}
	return pos
}
