package results

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
)

func TestNewMetric(t *testing.T) {
	values := []int64{50, 10, 40, 20, 30, 60, 70, 80, 100, 90}
	m := NewMetric(values, 2)
	if !slices.Equal(m.Values, values) {
		t.Errorf("Values = %v; want run order %v", m.Values, values)
	}
	values[0] = -1
	if m.Values[0] != 50 {
		t.Error("Values aliases the caller's slice")
	}
	want := Metric{Unit: "us", Count: 10, Min: 10, P50: 50, P75: 80, P90: 90, P99: 100, Max: 100, Mean: 55, Negative: 2}
	got := m
	got.Values, got.HDR = nil, ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summary = %+v\nwant %+v", got, want)
	}
	h, err := metrics.DecodeHistogram(m.HDR)
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 10 || h.Max() != 100 {
		t.Errorf("hdr: count %d max %d", h.Count(), h.Max())
	}

	big := NewMetric([]int64{1, metrics.HistogramHighest * 2}, 0)
	if big.Overflow != 1 || big.Max != metrics.HistogramHighest*2 {
		t.Errorf("over-range sample: overflow %d, max %d", big.Overflow, big.Max)
	}
	empty := NewMetric(nil, 0)
	if empty.Count != 0 || empty.Values == nil || empty.HDR == "" {
		t.Errorf("empty metric = %+v", empty)
	}
}

func TestBuildCell(t *testing.T) {
	step := func(stage, seq int, start, end time.Duration, inline bool) engine.StepSpan {
		return engine.StepSpan{Stage: stage, Seq: seq, Start: start, End: end, Inline: inline, Attempt: 1}
	}
	ms := time.Millisecond
	seq := func(id string, gap time.Duration) metrics.RunTimeline {
		return metrics.RunTimeline{ID: id, Finished: true, Done: 10 * ms, Steps: []engine.StepSpan{
			step(0, 0, 1*ms, 2*ms, false), step(1, 1, 2*ms+gap, 3*ms+gap, true)}}
	}
	tls := []metrics.RunTimeline{
		seq("r1", ms), seq("r2", 2*ms), seq("r3", 3*ms),
		{ID: "r4", Finished: true, Failed: true, Done: ms, Error: "boom"},
		{ID: "r5", Cut: time.Second, Steps: []engine.StepSpan{step(0, 0, ms, 2*ms, false)}},
	}
	id := Cell{Scenario: "sequential", Steps: 2, Version: "baseline", World: "mem", Profile: "none",
		Target: "workflow 4.8.9 · local", TargetSpec: "workflow --world=local", TargetWorld: "world-local"}
	c := BuildCell(id, tls, BuildOptions{Elapsed: 1500 * ms, DriverLag: []time.Duration{ms, -ms},
		Unstarted: []string{"r6"}, Metrics: metrics.Config{Stall: metrics.StallRule{Threshold: 500 * ms}}})

	if c.Scenario != "sequential" || c.Steps != 2 || c.Version != "baseline" || c.Switches == nil {
		t.Errorf("identity = %+v", c)
	}
	// A labelled target's cell keeps the plan's spec (its key for --resume
	// and compare) and the world the target named.
	if c.Target != id.Target || c.TargetSpec != id.TargetSpec || c.TargetWorld != id.TargetWorld {
		t.Errorf("target identity = %q %q %q, want %q %q %q", c.Target, c.TargetSpec, c.TargetWorld, id.Target, id.TargetSpec, id.TargetWorld)
	}
	if c.Runs != 6 || c.Errors != 1 || c.Stalls != 2 || c.ElapsedMS != 1500 || c.StallThresholdMS != 500 {
		t.Errorf("counts: runs %d errors %d stalls %d elapsed %v threshold %v", c.Runs, c.Errors, c.Stalls, c.ElapsedMS, c.StallThresholdMS)
	}
	wantStalls := []StalledRun{{Run: "r5", TTLSMS: 1000}, {Run: "r6", NotStarted: true}}
	if !slices.Equal(c.StalledRuns, wantStalls) {
		t.Errorf("StalledRuns = %+v; want %+v", c.StalledRuns, wantStalls)
	}
	if len(c.FailedRuns) != 1 || c.FailedRuns[0] != (FailedRun{Run: "r4", Error: "boom"}) {
		t.Errorf("FailedRuns = %+v", c.FailedRuns)
	}
	wantValues := map[string][]int64{
		metrics.TTFS:       {1000, 1000, 1000, 1000},
		metrics.TTLS:       {4000, 5000, 6000, 1000000},
		metrics.STSO:       {1000, 2000, 3000},
		metrics.STSOInline: {1000, 2000, 3000},
		metrics.WO:         {2000, 3000, 4000},
		metrics.TTC:        {10000, 10000, 10000, 1000000},
		metrics.FirstEnd:   {2000, 2000, 2000, 2000},
	}
	for name, want := range wantValues {
		if m, ok := c.Metrics[name]; !ok || !slices.Equal(m.Values, want) {
			t.Errorf("%s = %v; want %v", name, c.Metrics[name].Values, want)
		}
	}
	if len(c.Metrics) != len(wantValues) {
		t.Errorf("metrics %v; want only those with samples", slices.Sorted(maps.Keys(c.Metrics)))
	}
	// gaps 1, 2, 3 ms all at stage 1: no slope.
	if c.STSOSlopeUS != nil {
		t.Errorf("STSO slope = %v; want none (one stage index)", *c.STSOSlopeUS)
	}
	if c.DriverLag == nil || !slices.Equal(c.DriverLag.Values, []int64{1000, 0}) || c.DriverLag.Negative != 1 {
		t.Errorf("DriverLag = %+v", c.DriverLag)
	}
	f := sampleFile()
	f.Cells = []Cell{c}
	if err := validate("built", f); err != nil {
		t.Errorf("built cell does not validate: %v", err)
	}
}

// TestBuildCellPerRun: a metric with several samples per run keeps one
// aggregate per run that had a sample, in run order (the unit compare and
// gate test); a metric with one sample per run keeps none.
func TestBuildCellPerRun(t *testing.T) {
	ms := time.Millisecond
	// Three steps: gaps a and b (ms) between them.
	seq := func(id string, a, b time.Duration) metrics.RunTimeline {
		return metrics.RunTimeline{ID: id, Finished: true, Done: 100 * ms, Steps: []engine.StepSpan{
			{Stage: 0, Seq: 0, Start: ms, End: 2 * ms, Attempt: 1},
			{Stage: 1, Seq: 1, Start: 2*ms + a, End: 3*ms + a, Attempt: 1},
			{Stage: 2, Seq: 2, Start: 3*ms + a + b, End: 4*ms + a + b, Attempt: 1}}}
	}
	tls := []metrics.RunTimeline{
		seq("r1", ms, 3*ms),
		{ID: "r2", Finished: true, Failed: true, Done: ms, Error: "boom"},
		seq("r3", 2*ms, 2*ms),
		{ID: "r4", Finished: true, Done: ms}, // no step: no gap
		seq("r5", 10*ms, 20*ms),
	}
	c := BuildCell(Cell{Scenario: "sequential", Steps: 3, Version: "baseline", World: "mem", Profile: "none"}, tls, BuildOptions{})
	stso := c.Metrics[metrics.STSO]
	if !slices.Equal(stso.Values, []int64{1000, 3000, 2000, 2000, 10000, 20000}) {
		t.Fatalf("stso values %v", stso.Values)
	}
	if stso.PerRunStat != "run mean" || !slices.Equal(stso.PerRun, []int64{2000, 2000, 15000}) {
		t.Errorf("stso per run %v (%s), want the mean gap of each of the 3 runs with gaps", stso.PerRun, stso.PerRunStat)
	}
	if ttls := c.Metrics[metrics.TTLS]; ttls.PerRun != nil || ttls.PerRunStat != "" {
		t.Errorf("ttls has per-run aggregates %v: its values are per run", ttls.PerRun)
	}
	f := sampleFile()
	f.Cells = []Cell{c}
	if err := validate("built", f); err != nil {
		t.Errorf("built cell does not validate: %v", err)
	}
	m := f.Cells[0].Metrics[metrics.STSO]
	m.PerRunStat = "run max"
	f.Cells[0].Metrics[metrics.STSO] = m
	if err := validate("bad", f); err == nil || !strings.Contains(err.Error(), "per_run_stat") {
		t.Errorf("unknown per_run_stat: err = %v", err)
	}
}

// BenchmarkBuildCell10k builds a cell from 10,000 fan-out runs of 20
// branches: Collect plus a summary and HDR encoding per metric.
func BenchmarkBuildCell10k(b *testing.B) {
	tls := make([]metrics.RunTimeline, 10000)
	for i := range tls {
		t0 := time.Duration(i) * time.Millisecond
		steps := make([]engine.StepSpan, 20)
		var last time.Duration
		for j := range steps {
			start := t0 + time.Duration(100+(i*7+j*13)%500)*time.Microsecond
			end := start + time.Duration(20+(i+j)%30)*time.Microsecond
			steps[j] = engine.StepSpan{Index: j, Seq: j, Start: start, End: end, Attempt: 1}
			last = max(last, end)
		}
		tls[i] = metrics.RunTimeline{ID: fmt.Sprint("run-", i), T0: t0, Finished: true, Done: last + 50*time.Microsecond, Steps: steps}
	}
	id := Cell{Scenario: "fanout", Branches: 20, Version: "baseline", World: "mem", Profile: "none"}
	b.ReportAllocs()
	for b.Loop() {
		BuildCell(id, tls, BuildOptions{})
	}
}
