package reporters

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/durabench/durabench/results"
)

// TestLinearTicks: every linear latency axis names 4 to 8 values at a 1-2-5
// step, starting from a round value, and integer axes never get fractions.
func TestLinearTicks(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		integer  bool
		first    string // first label, through msLabel
		step     float64
	}{
		{0, 262.5, false, "0", 50},      // the 256-branch CDF that showed only 0 and 250 ms
		{0, 6500, false, "0", 1000},     // 0 to 6.5 s
		{0, 33, false, "0", 5},          // skew boxes
		{0, 0.9, false, "0", 0.2},       // sub-millisecond
		{1.2, 4.7, false, "1.5ms", 0.5}, // not from zero
		{0, 3, true, "0", 1},            // counts of 0..3: no 0.5
		{0, 1234, true, "0", 200},
		{-1e-12, 58, true, "0", 10},  // a histogram's count axis: "0", not "-0"
		{0, 18000, false, "0", 5000}, // 0, 5, 10, 15 s: not 10 labels at 2 s
		{0, 1700, false, "0", 500},   // 0 to 1.5 s by 0.5 s: not 9 labels at 0.2 s
	} {
		ts := linearTicks(tc.min, tc.max, tc.integer)
		var labelled []float64
		for _, tk := range ts {
			if tk.Label != "" {
				labelled = append(labelled, tk.Value)
			}
			if tk.Value < tc.min-1e-9 || tk.Value > tc.max+1e-9 {
				t.Errorf("[%g, %g]: tick %g outside the axis", tc.min, tc.max, tk.Value)
			}
		}
		if n := len(labelled); n < 4 && !tc.integer || n > 8 {
			t.Errorf("[%g, %g]: %d labels %v, want 4 to 8", tc.min, tc.max, n, labelled)
			continue
		}
		if got := (axisTicks{ms: true}).Ticks(tc.min, tc.max)[0].Label; tc.integer {
			got = strconv.FormatFloat(labelled[0], 'g', 4, 64)
			if got != tc.first {
				t.Errorf("[%g, %g]: first label %q, want %q", tc.min, tc.max, got, tc.first)
			}
		} else if got != tc.first {
			t.Errorf("[%g, %g]: first label %q, want %q", tc.min, tc.max, got, tc.first)
		}
		for i := 1; i < len(labelled); i++ {
			if d := labelled[i] - labelled[i-1]; math.Abs(d-tc.step) > tc.step*1e-9 {
				t.Errorf("[%g, %g]: step %g between %g and %g, want %g", tc.min, tc.max, d, labelled[i-1], labelled[i], tc.step)
			}
		}
	}
}

// TestLogTicks: a log axis names 1, 2, 5 × 10ⁿ, only the powers of ten over
// more than four decades, and at least two values over a narrow range.
func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		want     []string
	}{
		{0.08, 25, []string{"100µs", "200µs", "500µs", "1ms", "2ms", "5ms", "10ms", "20ms"}},
		{0.05, 2e4, []string{"100µs", "1ms", "10ms", "100ms", "1s", "10s"}},
		{250, 900, []string{"300ms", "500ms"}},
	} {
		var got []string
		for _, tk := range (axisTicks{log: true, ms: true}).Ticks(tc.min, tc.max) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("[%g, %g]: labels %v, want %v", tc.min, tc.max, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("[%g, %g]: labels %v, want %v", tc.min, tc.max, got, tc.want)
				break
			}
		}
	}
}

// TestSpreadLabels: end labels never overlap, stay inside the data area,
// keep their order and do not move when they have room.
func TestSpreadLabels(t *testing.T) {
	const h = 15
	for _, tc := range []struct {
		name string
		want []vg.Length
	}{
		{"apart", []vg.Length{50, 200, 400}},
		{"two close", []vg.Length{300, 305}},
		{"equal", []vg.Length{300, 300, 300, 300}},
		{"ten within 30 px", []vg.Length{300, 303, 306, 309, 312, 315, 318, 321, 324, 327}},
		{"at the top", []vg.Length{495, 498, 499, 500}},
		{"at the bottom", []vg.Length{0, 1, 2, 20}},
		{"unsorted", []vg.Length{320, 100, 310, 105, 315}},
		{"two clusters that meet", []vg.Length{100, 102, 104, 135, 137, 139}},
	} {
		heights := make([]vg.Length, len(tc.want))
		for i := range heights {
			heights[i] = h
		}
		pos := spreadLabels(tc.want, heights, 0, 500)
		for i := range pos {
			if pos[i]-h/2 < -1e-9 || pos[i]+h/2 > 500+1e-9 {
				t.Errorf("%s: label %d at %v leaves the area", tc.name, i, pos[i])
			}
			for j := range pos {
				if i == j {
					continue
				}
				if d := math.Abs(float64(pos[i] - pos[j])); d < h-1e-9 {
					t.Errorf("%s: labels %d and %d overlap (%v and %v)", tc.name, i, j, pos[i], pos[j])
				}
				if tc.want[i] < tc.want[j] && pos[i] > pos[j] {
					t.Errorf("%s: labels %d and %d swapped", tc.name, i, j)
				}
			}
		}
		if tc.name == "apart" {
			for i := range pos {
				if pos[i] != tc.want[i] {
					t.Errorf("apart: label %d moved from %v to %v", i, tc.want[i], pos[i])
				}
			}
		}
		if tc.name == "two close" && (math.Abs(float64(pos[0]+pos[1])/2-302.5) > 1e-9) {
			t.Errorf("two close: %v, want centred on 302.5", pos)
		}
	}
}

// TestCensoredP50: a cell whose runs mostly never finished (cut by the cell
// timeout or never started) has a p50 that is only a lower bound, and its
// chart label says so; half or fewer unfinished, or stalls that finished
// (slow but measured), keep a plain value.
func TestCensoredP50(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runs    int
		stalled []results.StalledRun
		label   string
	}{
		{"all cut", 2, []results.StalledRun{{Run: "a", TTLSMS: 240000}, {Run: "b", NotStarted: true}}, "≥240.0s (2/2 runs unfinished)"},
		{"2 of 3 cut", 3, []results.StalledRun{{Run: "a"}, {Run: "b"}}, "≥240.0s (2/3 runs unfinished)"},
		{"half cut", 2, []results.StalledRun{{Run: "a"}}, "240.0s"},
		{"stalls that finished", 2, []results.StalledRun{{Run: "a", Finished: true}, {Run: "b", Finished: true}}, "240.0s"},
		{"no runs", 0, nil, "240.0s"},
	} {
		cell := &results.Cell{Runs: tc.runs, Stalls: len(tc.stalled), StalledRuns: tc.stalled}
		note, _ := censoredP50(cell)
		if got := p50Label(240e6, note); got != tc.label {
			t.Errorf("%s: label %q, want %q", tc.name, got, tc.label)
		}
	}
}

// TestCriticalPathAxisNamesTime: the critical-path chart's time axis is
// labelled as every latency axis is — 4 to 8 values at a 1-2-5 step, each
// with its unit ("2s", "500ms") — not plot's default two or three bare
// numbers ("8000", "16000" over "(ms)").
func TestCriticalPathAxisNamesTime(t *testing.T) {
	c := newCharts(fixtureHead(), nil)
	p, err := c.criticalPath(c.groups[0])
	if err != nil || p == nil {
		t.Fatalf("no critical-path chart: %v", err)
	}
	for _, span := range []float64{1.7, 420, 18_000} { // ms
		var labels []string
		for _, tk := range p.X.Tick.Marker.Ticks(0, span) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 4 || len(labels) > 8 {
			t.Errorf("0–%gms: %d labels %q, want 4 to 8", span, len(labels), labels)
		}
		for _, l := range labels[1:] {
			if !strings.HasSuffix(l, "s") {
				t.Errorf("0–%gms: label %q has no unit", span, l)
			}
		}
	}
}
