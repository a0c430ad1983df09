package reporters

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Chart size: legible on a laptop screen and in a GitHub comment.
const (
	chartWidthPx  = 900
	chartHeightPx = 600
	chartDPI      = 96
)

// palette is the Okabe-Ito colour-blind-safe palette (black last): a
// version keeps its colour across every chart of a report.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{180, 160, 0, 255},   // dark yellow
	color.RGBA{0, 0, 0, 255},
}

// PNG writes charts of f (and, where it has matching cells, baseline) into
// dir, one file each, and returns their paths:
//
//   - cdf-*.png: the headline latency's distribution per cell group, one line
//     per version (dashed: baseline), on a percentile axis scaled by
//     log(1/(1−p)) so the tail gets as much room as the median;
//   - ttls-vs-branches.png: TTLS p50 against the fan-out width, one line per
//     version and switch set (where a cliff shows);
//   - stso-*.png: step-to-step overhead histograms, inline against queue-hop;
//   - skew-*.png: per-run skew as a box per version;
//   - critical-path-*.png: where the time went, a bar per cell stacked by
//     critical-path category (pngpath.go).
//
// The directory is created when missing.
func PNG(dir string, f *results.File, baseline *results.File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("png: %w", err)
	}
	if baseline != nil && baseline.Methodology != f.Methodology {
		baseline = nil // measured differently: never drawn side by side
	}
	c := newCharts(f, baseline)
	var files []string
	var errs []error
	// The widest end-of-line label of the charts that have them: room
	// right of the data that a legend beside it would take too.
	labelW := map[*plot.Plot]vg.Length{}
	save := func(name string, p *plot.Plot, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("png %s: %w", name, err))
			return
		}
		if p == nil {
			return
		}
		path := filepath.Join(dir, name)
		if err := savePNG(p, path, labelW[p]); err != nil {
			errs = append(errs, err)
			return
		}
		files = append(files, path)
	}
	for _, g := range c.groups {
		for _, fam := range cellFamilies(g.Cells) {
			p, err := c.cdf(g, fam)
			save("cdf-"+slug(g.Name, familyLabel(fam)+".png"), p, err)
		}
	}
	for _, g := range c.groups {
		if !hasBranchSweep(g.Cells) {
			continue
		}
		name := "ttls-vs-branches.png"
		if g.Name != "fanout" {
			name = slug(g.Name, "ttls-vs-branches.png")
		}
		p, w, err := c.cliff(g)
		labelW[p] = w
		save(name, p, err)
	}
	for _, g := range c.groups {
		for _, cell := range g.Cells {
			if _, ok := cell.Metrics["stso_inline"]; !ok {
				if _, ok := cell.Metrics["stso_queue"]; !ok {
					continue
				}
			}
			p, err := c.stso(g, cell)
			save("stso-"+slug(g.Name, c.lab.label(cell)+".png"), p, err)
		}
	}
	for _, g := range c.groups {
		if _, ok := firstMetric(g.Cells, "skew"); !ok {
			continue
		}
		for _, fam := range cellFamiliesBy(g.Cells, false) {
			p, err := c.skew(g, fam)
			save("skew-"+slug(g.Name, familyLabel(fam)+".png"), p, err)
		}
	}
	for _, g := range c.groups {
		p, err := c.criticalPath(g)
		save(slug("critical-path", g.Name+".png"), p, err)
	}
	for _, g := range c.groups {
		p, err := c.crttProgress(g)
		save(slug("crtt-progress", g.Name+".png"), p, err)
		p, err = c.crttBySize(g)
		save(slug("crtt-by-size", g.Name+".png"), p, err)
	}
	return files, errors.Join(errs...)
}

// savePNG draws p at the chart size with its legend in a column to the
// right of the data, where it can never hide a line or a label, and writes
// the PNG. A chart with end-of-line labels as wide as labelW gets its
// legend below the data instead when that leaves the data more room.
func savePNG(p *plot.Plot, path string, labelW vg.Length) error {
	w := vg.Length(chartWidthPx) * vg.Inch / chartDPI
	h := vg.Length(chartHeightPx) * vg.Inch / chartDPI
	canvas := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(chartDPI))
	dc := draw.New(canvas)
	leg := p.Legend
	p.Legend = plot.NewLegend()
	r := leg.Rectangle(dc)
	lw := r.Size().X + vg.Points(16)
	lh := r.Size().Y + vg.Points(8)
	below := labelW > 0 && lh < h*0.4 && (w-labelW)*(h-lh) > (w-lw-labelW)*h
	switch {
	case r.Size().Y == 0:
		p.Draw(dc)
	case below:
		p.Draw(draw.Crop(dc, 0, 0, lh, 0))
		leg.Top, leg.Left = true, true
		leg.XOffs, leg.YOffs = vg.Points(48), 0
		leg.Draw(draw.Crop(dc, 0, 0, 0, -(h - lh)))
	case lw > w*0.4:
		// Too wide to sit beside the data: back inside, top left.
		p.Legend = leg
		p.Draw(dc)
	default:
		p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
		leg.Top, leg.Left = true, true
		leg.XOffs, leg.YOffs = vg.Points(6), 0
		top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + vg.Points(10)
		leg.Draw(draw.Crop(dc, w-lw, 0, 0, -top))
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("png: %w", err)
	}
	// Flat colours compress well even at the fastest level.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(out, canvas.Image()); err != nil {
		out.Close()
		return fmt.Errorf("png %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("png %s: %w", path, err)
	}
	return nil
}

// shortSwitches abbreviates kill-switch names for chart labels
// ("resilient-step-dispatch=0" -> "rsd=0"); switchKey lists the
// abbreviations a chart used, for its legend.
func shortSwitches(sw []string) string {
	var out []string
	for _, s := range sw {
		name, val, _ := strings.Cut(s, "=")
		if strings.Contains(name, "-") {
			var initials strings.Builder
			for _, part := range strings.Split(name, "-") {
				if part != "" {
					initials.WriteByte(part[0])
				}
			}
			name = initials.String()
		}
		if val != "" {
			name += "=" + val
		}
		out = append(out, name)
	}
	return strings.Join(out, "+")
}

// addSwitchKey adds legend lines explaining the abbreviated switch names of
// cells.
func addSwitchKey(p *plot.Plot, cells []*results.Cell) {
	seen := map[string]bool{}
	for _, c := range cells {
		for _, s := range c.Switches {
			name, _, _ := strings.Cut(s, "=")
			short, _, _ := strings.Cut(shortSwitches([]string{s}), "=")
			if short != name && !seen[name] {
				seen[name] = true
				p.Legend.Add(short + ": " + name)
			}
		}
	}
}

// slug makes a file name from parts: lower case, [a-z0-9.-] only.
func slug(parts ...string) string {
	s := strings.ToLower(strings.Join(parts, "-"))
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(strings.ReplaceAll(b.String(), "-.", "."), "-")
}

// charts holds what every chart of one report shares.
type charts struct {
	f      *results.File
	base   map[stats.CellKey]*results.Cell
	baseF  *results.File
	lab    labeler
	groups []scenarioGroup
	colour map[string]color.Color // by engineOf
}

// lineName is how a chart labels a cell's line: its engine, the built-in
// one's version as "reference VERSION" when targets are in the file.
func (c *charts) lineName(cell *results.Cell) string {
	if c.lab.targets && cell.Target == "" {
		return "reference " + cell.Version
	}
	return engineOf(cell)
}

// engineOf names the engine a cell measured, as charts label and colour
// it: the foreign target's name, or the built-in engine's version.
func engineOf(c *results.Cell) string {
	if c.Target != "" {
		return c.Target
	}
	return c.Version
}

func newCharts(f, baseline *results.File) *charts {
	c := &charts{f: f, baseF: baseline, base: cellIndex(baseline), lab: newLabeler(f, baseline), groups: groupScenarios(f), colour: map[string]color.Color{}}
	var versions []string
	for _, v := range f.Plan.Versions {
		versions = append(versions, v.Name)
	}
	for _, x := range []*results.File{f, baseline} {
		if x == nil {
			continue
		}
		for i := range x.Cells {
			if e := engineOf(&x.Cells[i]); !slices.Contains(versions, e) {
				versions = append(versions, e)
			}
		}
	}
	for i, v := range versions {
		c.colour[v] = palette[i%len(palette)]
	}
	return c
}

// familyKey is a cell's key without its version (and, with switches false,
// without its switch set): the cells a chart draws side by side.
func familyKey(c *results.Cell, switches bool) stats.CellKey {
	k := cellKey(c)
	k.Version, k.Target = "", ""
	if !switches {
		k.Switches = ""
	}
	return k
}

// cellFamilies groups cells that differ only by version.
func cellFamilies(cells []*results.Cell) [][]*results.Cell { return cellFamiliesBy(cells, true) }

func cellFamiliesBy(cells []*results.Cell, switches bool) [][]*results.Cell {
	idx := map[stats.CellKey]int{}
	var out [][]*results.Cell
	// Foreign targets have no world or profile of ours: with them in the
	// file, a family is every engine at one point of the scenario, so
	// their lines overlay the built-in engine's.
	engines := slices.ContainsFunc(cells, func(c *results.Cell) bool { return c.Target != "" })
	for _, c := range cells {
		k := familyKey(c, switches)
		if engines {
			k.World, k.Profile = "", ""
		}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}

// familyLabel describes a family; one that spans engines (foreign targets
// next to the built-in engine) names no world.
func familyLabel(fam []*results.Cell) string {
	c := *fam[0]
	if slices.ContainsFunc(fam, func(x *results.Cell) bool { return x.Target != "" }) {
		c.World = ""
	}
	return familyName(&c)
}

// familyName describes a cell family: "256-branches", "50-steps-rsd=0".
func familyName(c *results.Cell) string {
	var parts []string
	if c.Branches > 0 {
		parts = append(parts, fmt.Sprintf("%d branches", c.Branches))
	}
	if c.Steps > 0 {
		parts = append(parts, fmt.Sprintf("%d steps", c.Steps))
	}
	if len(c.Switches) > 0 {
		parts = append(parts, shortSwitches(c.Switches))
	}
	if len(c.Options) > 0 {
		parts = append(parts, optionsLabel(c.Options))
	}
	if c.World != "" {
		parts = append(parts, c.World+"/"+c.Profile)
	}
	return strings.Join(parts, ", ")
}

func hasBranchSweep(cells []*results.Cell) bool {
	seen := map[int]bool{}
	for _, c := range cells {
		if _, ok := c.Metrics["ttls"]; ok && c.Branches > 0 {
			seen[c.Branches] = true
		}
	}
	return len(seen) >= 2
}

// newPlot is a plot with the report's title and font sizes.
func (c *charts) newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	if c.f.VirtualTime {
		title += " (virtual time)"
	}
	if c.f.Partial {
		title += " — PARTIAL"
	}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = font.Length(15)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = font.Length(13)
		a.Tick.Label.Font.Size = font.Length(11)
	}
	p.Legend.TextStyle.Font.Size = font.Length(12)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.Padding = vg.Points(3)
	p.Add(plotter.NewGrid())
	return p
}

// headStyle and baseStyle tell the run under review (solid, thick) from
// the baseline (dashed, thin) in every chart.
func headStyle(col color.Color) draw.LineStyle {
	return draw.LineStyle{Color: col, Width: vg.Points(2.2)}
}

func baseStyle(col color.Color) draw.LineStyle {
	return draw.LineStyle{Color: col, Width: vg.Points(1.4), Dashes: []vg.Length{vg.Points(6), vg.Points(4)}}
}

// switchStyle marks a kill-switch set on a head line: solid without
// switches, dotted or dash-dotted with.
func switchStyle(col color.Color, idx int) draw.LineStyle {
	st := headStyle(col)
	switch idx % 3 {
	case 1:
		st.Dashes = []vg.Length{vg.Points(1.5), vg.Points(3)}
	case 2:
		st.Dashes = []vg.Length{vg.Points(8), vg.Points(3), vg.Points(1.5), vg.Points(3)}
	}
	return st
}

func (c *charts) baseLabel() string {
	if c.baseF == nil {
		return "baseline"
	}
	return "base " + shortCommit(c.baseF.GitCommit)
}

// percentileScale maps a percentile 0..100 to log10(1/(1−p)), the HDR
// histogram percentile plot's axis: each further "nine" gets equal room.
type percentileScale struct{}

func pscale(p float64) float64 { return math.Log10(100 / (100 - math.Min(p, maxPercentile))) }

func (percentileScale) Normalize(min, max, x float64) float64 {
	lo, hi := pscale(min), pscale(max)
	return (pscale(x) - lo) / (hi - lo)
}

// maxPercentile is where percentile axes end.
const maxPercentile = 99.99

var percentileTicks = plot.ConstantTicks{
	{Value: 0, Label: "0%"}, {Value: 50, Label: "50%"}, {Value: 75}, {Value: 90, Label: "90%"},
	{Value: 95}, {Value: 99, Label: "99%"}, {Value: 99.5}, {Value: 99.9, Label: "99.9%"},
	{Value: 99.95}, {Value: 99.99, Label: "99.99%"},
}

// percentileLine returns the empirical distribution of vals (µs) as points
// (percentile, ms): a step per sample for small samples, a log-spaced
// percentile grid for large ones.
func percentileLine(vals []int64) plotter.XYs {
	s := slices.Sorted(slices.Values(vals))
	n := len(s)
	var pts plotter.XYs
	if n <= 400 {
		for i, v := range s {
			ms := float64(v) / 1000
			lo := float64(i) / float64(n) * 100
			hi := math.Min(float64(i+1)/float64(n)*100, maxPercentile)
			pts = append(pts, plotter.XY{X: lo, Y: ms}, plotter.XY{X: hi, Y: ms})
		}
		return pts
	}
	const k = 300
	for i := 0; i <= k; i++ {
		p := 100 * (1 - math.Pow(10, -4*float64(i)/k))
		p = math.Min(p, maxPercentile)
		pts = append(pts, plotter.XY{X: p, Y: float64(s[nearestRank(n, p)]) / 1000})
	}
	return pts
}

// useLogY reports whether values spread over more than a factor of 30, when
// a linear axis would flatten everything but the outliers.
func useLogY(lo, hi float64) bool { return lo > 0 && hi/lo > 30 }

// axisTicks labels an axis plainly ("0.5", "20", "1000") or, for a
// millisecond axis, with units ("500µs", "20ms", "2s"), at 1-2-5 steps: on a
// linear axis the step that gives 4 to 8 labels (linearTicks), on a log axis
// 1, 2, 5 × 10ⁿ (logTicks), easier to read than plot.LogTicks' exponents.
type axisTicks struct{ log, ms bool }

func (t axisTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	if t.log {
		ts = logTicks(min, max)
	} else {
		ts = linearTicks(min, max, !t.ms)
	}
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		if t.ms {
			ts[i].Label = msLabel(ts[i].Value)
		} else {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 4, 64)
		}
	}
	return ts
}

// msLabel renders a millisecond value with the unit that keeps it short.
func msLabel(ms float64) string {
	g := func(v float64) string { return strconv.FormatFloat(math.Round(v*1000)/1000, 'g', 4, 64) }
	switch a := math.Abs(ms); {
	case a == 0:
		return "0"
	case a >= 1000:
		return g(ms/1000) + "s"
	case a >= 1:
		return g(ms) + "ms"
	default:
		return g(ms*1000) + "µs"
	}
}

func setLogY(p *plot.Plot, lo, hi float64) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = axisTicks{log: true, ms: true}
	p.Y.Min, p.Y.Max = lo/1.2, hi*1.2
}

// cdf charts the headline metric's distribution of one cell family, a line
// per version for this run and, dashed, for the baseline.
func (c *charts) cdf(g scenarioGroup, fam []*results.Cell) (*plot.Plot, error) {
	name := headlineMetric(fam)
	if name == "" {
		return nil, nil
	}
	title := metricTitle(name)
	p := c.newPlot(fmt.Sprintf("%s distribution — %s, %s", title, g.Name, familyLabel(fam)),
		"percentile (log scale: each tick adds a nine)", title)
	p.Y.Tick.Marker = axisTicks{ms: true}
	p.X.Scale = percentileScale{}
	p.X.Tick.Marker = percentileTicks
	p.X.Min, p.X.Max = 0, maxPercentile
	lo, hi := math.Inf(1), math.Inf(-1)
	add := func(label string, vals []int64, style draw.LineStyle) error {
		if len(vals) == 0 {
			return nil
		}
		pts := percentileLine(vals)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle = style
		p.Add(l)
		p.Legend.Add(label, l)
		for _, pt := range pts {
			if pt.Y > 0 {
				lo = math.Min(lo, pt.Y)
			}
			hi = math.Max(hi, pt.Y)
		}
		return nil
	}
	for _, cell := range fam {
		col := c.colour[engineOf(cell)]
		if err := add(c.lineName(cell), samples(cell.Metrics[name]), headStyle(col)); err != nil {
			return nil, err
		}
		if b := c.base[cellKey(cell)]; b != nil {
			if err := add(c.lineName(cell)+" ("+c.baseLabel()+")", samples(b.Metrics[name]), baseStyle(col)); err != nil {
				return nil, err
			}
		}
	}
	if math.IsInf(lo, 1) {
		return nil, nil
	}
	addSwitchKey(p, fam)
	if useLogY(lo, hi) {
		setLogY(p, lo, hi)
		p.Y.Label.Text = title + " (log scale)"
	} else {
		p.Y.Min = 0
	}
	return p, nil
}

// cliff charts TTLS p50 against the fan-out width: a line per version and
// switch set (dotted with switches), dashed for the baseline, each head line
// labelled at its widest point with its name and value, so the fastest
// version at the widest fan-out reads without the legend.
func (c *charts) cliff(g scenarioGroup) (*plot.Plot, vg.Length, error) {
	p := c.newPlot(fmt.Sprintf("TTLS p50 vs fan-out width — %s", g.Name), "branches (log scale)", "TTLS p50 (log scale)")
	lines := c.cliffLines(g)
	if len(lines) == 0 {
		return nil, 0, nil
	}
	d, err := c.drawCliffLines(p, lines)
	if err != nil {
		return nil, 0, err
	}
	addSwitchKey(p, g.Cells)
	x0, x1 := cliffXAxis(p, d.branches)
	if d.lo <= 0 {
		p.Y.Min = 0
		return p, 0, nil
	}
	setLogY(p, d.lo, d.hi)
	return p, cliffEndLabels(p, d.ends, x0, x1), nil
}

// cliffLine is one line of the cliff chart: a version and switch set (and
// world and profile, when they vary) across fan-out widths.
type cliffLine struct {
	name  string // version and switches
	col   color.Color
	pts   plotter.XYs
	base  bool
	shape int
	// cut holds, by branch count, the note of each point whose p50 is
	// censored (censoredP50): drawn hollow, labelled as a lower bound.
	cut map[float64]string
}

// cliffLines are the head's lines of scenario g, then the baseline's.
func (c *charts) cliffLines(g scenarioGroup) []cliffLine {
	var all []cliffLine
	switchIdx := map[string]int{}
	collect := func(cells []*results.Cell, base bool) {
		byLine := map[string]*cliffLine{}
		var order []string
		for _, cell := range cells {
			m, ok := cell.Metrics["ttls"]
			if !ok || m.Count == 0 || cell.Branches == 0 {
				continue
			}
			k := engineOf(cell) + "|" + switchSet(cell) + "|" + cell.World + "|" + cell.Profile
			s := byLine[k]
			if s == nil {
				name := c.lineName(cell)
				if len(cell.Switches) > 0 {
					name += " " + shortSwitches(cell.Switches)
				}
				if (c.lab.world || c.lab.profile) && cell.Target == "" {
					name += " " + cell.World + "/" + cell.Profile
				}
				if _, ok := switchIdx[switchSet(cell)]; !ok {
					switchIdx[switchSet(cell)] = len(switchIdx)
				}
				s = &cliffLine{name: name, col: c.colour[engineOf(cell)], base: base, shape: switchIdx[switchSet(cell)], cut: map[float64]string{}}
				byLine[k] = s
				order = append(order, k)
			}
			s.pts = append(s.pts, plotter.XY{X: float64(cell.Branches), Y: float64(m.P50) / 1000})
			if note, ok := censoredP50(cell); ok {
				s.cut[float64(cell.Branches)] = note
			}
		}
		for _, k := range order {
			s := byLine[k]
			slices.SortFunc(s.pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			all = append(all, *s)
		}
	}
	collect(g.Cells, false)
	if c.baseF != nil {
		var bcells []*results.Cell
		for i := range c.baseF.Cells {
			if bc := &c.baseF.Cells[i]; bc.Scenario == g.Name {
				bcells = append(bcells, bc)
			}
		}
		collect(bcells, true)
	}
	return all
}

// cliffEnd is the label at the widest point of a head line.
type cliffEnd struct {
	y    float64
	text string
	col  color.Color
}

// cliffDrawn is what drawing the lines found: the y range, the widths
// drawn, the head lines' end labels.
type cliffDrawn struct {
	lo, hi   float64
	branches []float64
	ends     []cliffEnd
}

// drawCliffLines adds each line to p (solid, dotted with switches, dashed
// for the baseline; a censored point hollow) with its legend entry.
func (c *charts) drawCliffLines(p *plot.Plot, lines []cliffLine) (cliffDrawn, error) {
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}
	d := cliffDrawn{lo: math.Inf(1), hi: math.Inf(-1)}
	branches := map[float64]bool{}
	var cutKey *plotter.Scatter // the legend's sample of a censored point
	for _, s := range lines {
		l, err := plotter.NewLine(s.pts)
		if err != nil {
			return d, err
		}
		var measured, cut plotter.XYs
		for _, pt := range s.pts {
			if _, ok := s.cut[pt.X]; ok {
				cut = append(cut, pt)
			} else {
				measured = append(measured, pt)
			}
		}
		sc, err := plotter.NewScatter(measured)
		if err != nil {
			return d, err
		}
		label := s.name
		if s.base {
			l.LineStyle = baseStyle(s.col)
			label += " (" + c.baseLabel() + ")"
		} else {
			l.LineStyle = switchStyle(s.col, s.shape)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: s.col, Radius: vg.Points(4), Shape: shapes[s.shape%len(shapes)]}
		if s.base {
			sc.GlyphStyle.Radius = vg.Points(2.5)
		}
		p.Add(l, sc)
		p.Legend.Add(label, l, sc)
		if len(cut) > 0 {
			cs, err := plotter.NewScatter(cut)
			if err != nil {
				return d, err
			}
			cs.GlyphStyle = draw.GlyphStyle{Color: s.col, Radius: sc.GlyphStyle.Radius + vg.Points(1), Shape: censoredGlyph{}}
			p.Add(cs)
			if cutKey == nil {
				cutKey = &plotter.Scatter{GlyphStyle: cs.GlyphStyle}
				cutKey.GlyphStyle.Color = color.Gray{90}
			}
		}
		for _, pt := range s.pts {
			d.lo, d.hi = math.Min(d.lo, pt.Y), math.Max(d.hi, pt.Y)
			branches[pt.X] = true
		}
		if !s.base {
			last := s.pts[len(s.pts)-1]
			d.ends = append(d.ends, cliffEnd{last.Y, s.name + " " + p50Label(last.Y*1000, s.cut[last.X]), s.col})
		}
	}
	if cutKey != nil {
		p.Legend.Add("hollow ↑: p50 ≥ value shown — over half the runs unfinished at the cell timeout", cutKey)
	}
	d.branches = slices.Sorted(maps.Keys(branches))
	return d, nil
}

// cliffXAxis makes p's x axis logarithmic with a tick at each width in xs
// (ascending), and room right of the widest for the end labels (the data
// area shrinks to make room for them: endLabels.GlyphBoxes). It returns
// the axis's first and last widths.
func cliffXAxis(p *plot.Plot, xs []float64) (x0, x1 float64) {
	var ticks plot.ConstantTicks
	for _, x := range xs {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(int(x))})
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = ticks
	x0, x1 = xs[0]/1.15, xs[len(xs)-1]
	p.X.Min = x0
	p.X.Max = x1 * math.Pow(x1/x0, 0.12)
	if x1 == x0 {
		p.X.Max = x1 * 1.5
	}
	return x0, x1
}

// cliffEndLabels adds the end-of-line labels at the widest fan-out, each in
// its line's colour, placed when the chart is drawn so that none overlaps
// another; it returns the widest label's width.
func cliffEndLabels(p *plot.Plot, ends []cliffEnd, x0, x1 float64) vg.Length {
	el := &endLabels{x: x1 * math.Pow(x1/x0, 0.04)}
	for _, e := range ends {
		sty := p.Y.Tick.Label
		sty.Color = e.col
		sty.Font.Size = font.Length(11)
		sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
		el.labels = append(el.labels, endLabel{y: e.y, text: e.text, style: sty})
	}
	p.Add(el)
	var widest vg.Length
	for _, l := range el.labels {
		widest = max(widest, l.style.Width(l.text))
	}
	return widest
}

// censoredP50 tells whether cell's TTLS p50 is censored: more than half of
// its runs have no measured TTLS (unfinished when the cell timeout cut
// them, or never started), so the p50 is only a lower bound (an unfinished
// run's TTLS is its elapsed time at the cut). note says so as the incidents
// of the markdown report count it: "2/2 runs unfinished".
func censoredP50(cell *results.Cell) (note string, ok bool) {
	cut, never := cutRuns(cell)
	unfinished := cut + never // "unfinished" as the incidents count them
	if cell.Runs == 0 || 2*unfinished <= cell.Runs {
		return "", false
	}
	return fmt.Sprintf("%d/%d runs unfinished", unfinished, cell.Runs), true
}

// p50Label is an end label's value: "22.71s", or for a censored p50 (note
// set) the lower bound it is, "≥240.0s (2/2 runs unfinished)".
func p50Label(us float64, note string) string {
	if note == "" {
		return metrics.FormatMicros(us)
	}
	return "≥" + metrics.FormatMicros(us) + " (" + note + ")"
}

// censoredGlyph marks a censored value: a hollow circle (white inside, so
// the line does not fill it) with an arrow up, "at least this".
type censoredGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (censoredGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	ring := make(vg.Path, 0, 3)
	ring.Move(vg.Point{X: pt.X + r, Y: pt.Y})
	ring.Arc(pt, r, 0, 2*math.Pi)
	ring.Close()
	c.SetColor(color.White)
	c.Fill(ring)
	ls := draw.LineStyle{Color: sty.Color, Width: vg.Points(1.6)}
	c.SetLineStyle(ls)
	c.Stroke(ring)
	top := vg.Point{X: pt.X, Y: pt.Y + 2.6*r}
	c.StrokeLine2(ls, pt.X, pt.Y+r, top.X, top.Y)
	c.StrokeLines(ls, []vg.Point{{X: top.X - 0.6*r, Y: top.Y - 0.7*r}, top, {X: top.X + 0.6*r, Y: top.Y - 0.7*r}})
}

// stso charts one sequential cell's step-to-step overhead, inline gaps
// against queue-hop gaps, on log-spaced bins (the two differ by orders of
// magnitude).
func (c *charts) stso(g scenarioGroup, cell *results.Cell) (*plot.Plot, error) {
	inline, queue := samples(cell.Metrics["stso_inline"]), samples(cell.Metrics["stso_queue"])
	all := append(slices.Clone(inline), queue...)
	if len(all) == 0 {
		return nil, nil
	}
	lo, hi := float64(slices.Min(all)), float64(slices.Max(all))
	lo = math.Max(lo, 1) / 1000 // ms; a 0 µs gap still needs a bin on a log axis
	hi = math.Max(hi/1000, lo*1.01)
	const nbins = 40
	// Log-spaced bins when the gaps span orders of magnitude (inline vs
	// queue-hop usually do), linear ones otherwise.
	logX := hi/lo >= 20
	edges := make([]float64, nbins+1)
	for i := range edges {
		if logX {
			edges[i] = lo * math.Pow(hi/lo, float64(i)/nbins)
		} else {
			edges[i] = lo + (hi-lo)*float64(i)/nbins
		}
	}
	edges[nbins] *= 1.0001
	hist := func(vals []int64, col color.Color) *plotter.Histogram {
		bins := make([]plotter.HistogramBin, nbins)
		for i := range bins {
			bins[i] = plotter.HistogramBin{Min: edges[i], Max: edges[i+1]}
		}
		for _, v := range vals {
			ms := math.Max(float64(v), 1) / 1000
			i := binOf(edges, ms)
			bins[i].Weight++
		}
		h := &plotter.Histogram{Bins: bins, FillColor: col, LineStyle: draw.LineStyle{Color: col, Width: vg.Points(0.8)}}
		return h
	}
	xLabel := "step-to-step overhead"
	if logX {
		xLabel += " (log scale)"
	}
	p := c.newPlot(fmt.Sprintf("STSO inline vs queue-hop — %s, %s", g.Name, c.lab.label(cell)), xLabel, "step gaps")
	p.Y.Tick.Marker = axisTicks{}
	p.Legend.Left = false
	blue := color.NRGBA{0, 114, 178, 150}
	orange := color.NRGBA{213, 94, 0, 150}
	if len(inline) > 0 {
		h := hist(inline, blue)
		p.Add(h)
		p.Legend.Add(fmt.Sprintf("inline (n=%d, p50 %s)", len(inline), fmtUS(cell.Metrics["stso_inline"].P50)), h)
	} else {
		p.Legend.Add("inline: none")
	}
	if len(queue) > 0 {
		h := hist(queue, orange)
		p.Add(h)
		p.Legend.Add(fmt.Sprintf("queue-hop (n=%d, p50 %s)", len(queue), fmtUS(cell.Metrics["stso_queue"].P50)), h)
	} else {
		p.Legend.Add("queue-hop: none")
	}
	p.X.Tick.Marker = axisTicks{log: logX, ms: true}
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Min, p.X.Max = edges[0], edges[nbins]
	p.Y.Min = 0
	return p, nil
}

// binOf returns the bin index of x among ascending edges (len(edges)-1 bins).
func binOf(edges []float64, x float64) int {
	i, _ := slices.BinarySearch(edges, x)
	// BinarySearch gives the first edge >= x; x belongs to the bin below
	// it unless it sits exactly on an edge.
	if i < len(edges) && edges[i] == x {
		return min(i, len(edges)-2)
	}
	return min(max(i-1, 0), len(edges)-2)
}

// skew draws per-run skew as one box per version and switch set, with the
// baseline's box beside it, for one fan-out width.
func (c *charts) skew(g scenarioGroup, fam []*results.Cell) (*plot.Plot, error) {
	p := c.newPlot(fmt.Sprintf("Skew per run — %s, %s", g.Name, familyLabel(fam)), "", "skew: latest − earliest branch start")
	p.Y.Tick.Marker = axisTicks{ms: true}
	var names []string
	width := vg.Points(28)
	if c.base != nil {
		width = vg.Points(22)
	}
	hasBase, drawn := false, false
	for i, cell := range fam {
		label := c.lineName(cell)
		if len(cell.Switches) > 0 {
			label += "\n" + shortSwitches(cell.Switches)
		}
		names = append(names, label)
		col := c.colour[engineOf(cell)]
		box := func(m results.Metric, offset vg.Length, fill color.Color, line draw.LineStyle) (*plotter.BoxPlot, error) {
			vals := samples(m)
			if len(vals) == 0 {
				return nil, nil
			}
			vs := make(plotter.Values, len(vals))
			for j, v := range vals {
				vs[j] = float64(v) / 1000
			}
			b, err := plotter.NewBoxPlot(width, float64(i), vs)
			if err != nil {
				return nil, err
			}
			b.Offset = offset
			b.FillColor = fill
			b.BoxStyle, b.MedianStyle, b.WhiskerStyle = line, line, line
			b.MedianStyle.Width = vg.Points(2.5)
			b.GlyphStyle.Color = line.Color
			return b, nil
		}
		off := vg.Length(0)
		if c.base[cellKey(cell)] != nil {
			off = width / 2 * 1.1
		}
		r, gg, bb, _ := col.RGBA()
		light := color.NRGBA{uint8(r >> 8), uint8(gg >> 8), uint8(bb >> 8), 70}
		hb, err := box(cell.Metrics["skew"], off, light, draw.LineStyle{Color: col, Width: vg.Points(1.6)})
		if err != nil {
			return nil, err
		}
		if hb != nil {
			drawn = true
			p.Add(hb)
			if i == 0 && c.base != nil {
				p.Legend.Add("this run (solid)", &plotter.Line{LineStyle: hb.BoxStyle, FillColor: hb.FillColor})
			}
		}
		if b := c.base[cellKey(cell)]; b != nil {
			bs := baseStyle(col)
			bb, err := box(b.Metrics["skew"], -off, color.White, bs)
			if err != nil {
				return nil, err
			}
			if bb != nil {
				p.Add(bb)
				if !hasBase {
					p.Legend.Add(c.baseLabel()+" (dashed, left)", &plotter.Line{LineStyle: bb.BoxStyle})
					hasBase = true
				}
			}
		}
	}
	if !drawn {
		return nil, nil
	}
	addSwitchKey(p, fam)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	if len(names) > 5 {
		// Slanted, many version names fit side by side.
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	p.Y.Min = 0
	p.Y.Max *= 1.05 // whiskers clear the frame
	p.Legend.Left = false
	return p, nil
}
