package metrics

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
)

const ms = time.Millisecond

// sp is a step execution from start to end (ms) on the runtime clock.
func sp(stage, index, seq int, start, end float64, inline bool, attempt int) engine.StepSpan {
	return engine.StepSpan{Stage: stage, Index: index, Seq: seq,
		Start: dms(start), End: dms(end), Inline: inline, Attempt: attempt}
}

func dms(v float64) time.Duration { return time.Duration(v * float64(ms)) }

func chunk(i int, written, read float64) engine.ChunkSpan {
	return engine.ChunkSpan{Index: i, Written: dms(written), Read: dms(read)}
}

// Hand-built timelines with known answers. All times in ms.
var (
	// fanout: 3 branches, t0 = 10, branch 2 starts first and runs long.
	tlFanout = RunTimeline{ID: "fanout", T0: dms(10), Finished: true, Done: dms(25), Steps: []engine.StepSpan{
		sp(0, 0, 0, 12, 13, false, 1),
		sp(0, 1, 1, 15, 16, false, 1),
		sp(0, 2, 2, 11, 20, true, 1),
	}}
	// seq: 4 stages of 1; gaps 2 (inline), 3 (queue), 4 (inline).
	tlSeq = RunTimeline{ID: "seq", T0: 0, Finished: true, Done: dms(15), Steps: []engine.StepSpan{
		sp(0, 0, 0, 1, 2, false, 1),
		sp(1, 0, 1, 4, 5, true, 1),
		sp(2, 0, 2, 8, 9, false, 1),
		sp(3, 0, 3, 13, 14, true, 1),
	}}
	// redelivered: step 1 ran twice (attempt 1 at 3–4, attempt 2 at 10–11),
	// reported out of order.
	tlRedeliver = RunTimeline{ID: "redeliver", T0: 0, Finished: true, Done: dms(14), Steps: []engine.StepSpan{
		sp(0, 0, 0, 1, 2, false, 1),
		sp(1, 0, 1, 10, 11, false, 2),
		sp(1, 0, 1, 3, 4, false, 1),
		sp(2, 0, 2, 12, 13, true, 1),
	}}
	// multistage: fan-out of 2, then a fan-out of 2 (stage transition gap
	// = earliest start of stage 1 − latest end of stage 0 = 9 − 6 = 3).
	tlMulti = RunTimeline{ID: "multi", T0: 0, Finished: true, Done: dms(12), Steps: []engine.StepSpan{
		sp(0, 0, 0, 1, 6, false, 1),
		sp(0, 1, 1, 2, 4, false, 1),
		sp(1, 0, 2, 10, 11, false, 1),
		sp(1, 1, 3, 9, 10, true, 1),
	}}
	// skewclock: a step reported before t0 (clock stepped) → negative TTFS.
	tlNegative = RunTimeline{ID: "neg", T0: dms(5), Finished: true, Done: dms(9), Steps: []engine.StepSpan{
		sp(0, 0, 0, 4, 8, false, 1),
	}}
	// stream: 3 chunks, written every 10 ms, read 1, 2, 3 ms later.
	tlStream = RunTimeline{ID: "stream", T0: 0, Finished: true, Done: dms(30), Chunks: []engine.ChunkSpan{
		chunk(0, 0, 1), chunk(1, 10, 12), chunk(2, 20, 23),
	}}
	// hook: resumed at 5, the step before it does not count, next at 7.
	tlHook = RunTimeline{ID: "hook", T0: 0, Finished: true, Done: dms(9),
		Hooks: []HookSpan{{Token: "h", Created: dms(1), Resumed: dms(5), WasResumed: true}, {Token: "never", Created: dms(1)}},
		Steps: []engine.StepSpan{sp(0, 0, 0, 2, 3, false, 1), sp(2, 0, 1, 7, 8, false, 1)}}
	// unfinished: given up at 100 ms after one step.
	tlUnfinished = RunTimeline{ID: "stuck", T0: 0, Cut: dms(100), Steps: []engine.StepSpan{
		sp(0, 0, 0, 1, 2, false, 1),
	}}
)

func TestPerRunMetrics(t *testing.T) {
	type opt struct {
		d  time.Duration
		ok bool
	}
	tests := []struct {
		name     string
		tl       RunTimeline
		ttfs     opt
		ttls     opt
		wo       opt
		ttc      time.Duration
		skews    []time.Duration
		offsets  []time.Duration
		gaps     []Gap
		sl       []time.Duration
		so       opt
		interval time.Duration
		resume   []time.Duration
	}{
		{name: "fanout", tl: tlFanout,
			ttfs: opt{dms(1), true}, ttls: opt{dms(10), true},
			// the run waited for branch 2 (the last to end), which started
			// at 11.
			wo: opt{dms(1), true}, ttc: dms(15),
			skews: []time.Duration{dms(4)}, offsets: []time.Duration{dms(1), dms(4), 0},
		},
		{name: "sequential", tl: tlSeq,
			ttfs: opt{dms(1), true}, ttls: opt{dms(14), true},
			wo: opt{dms(10), true}, ttc: dms(15),
			gaps: []Gap{{1, dms(2), true}, {2, dms(3), false}, {3, dms(4), true}},
		},
		{name: "redelivered step counts once, first start to last end", tl: tlRedeliver,
			ttfs: opt{dms(1), true}, ttls: opt{dms(13), true},
			// 13 − (1 + (11 − 3) + 1) = 3
			wo: opt{dms(3), true}, ttc: dms(14),
			gaps: []Gap{{1, dms(1), false}, {2, dms(1), true}},
		},
		{name: "multistage fan-out", tl: tlMulti,
			ttfs: opt{dms(1), true}, ttls: opt{dms(11), true},
			// [0, 11] less the last to end of each stage: [1, 6] and [10, 11]
			wo: opt{dms(11 - (5 + 1)), true}, ttc: dms(12),
			skews: []time.Duration{dms(1), dms(1)}, offsets: []time.Duration{0, dms(1), dms(1), 0},
			gaps: []Gap{{1, dms(3), true}},
		},
		{name: "negative TTFS", tl: tlNegative,
			// the body covers all of [t0, 8]: WO is 0 (TTFS reports the clock step)
			ttfs: opt{dms(-1), true}, ttls: opt{dms(3), true}, wo: opt{0, true}, ttc: dms(4),
		},
		{name: "stream", tl: tlStream, interval: dms(5),
			ttls: opt{0, false}, wo: opt{0, false}, ttc: dms(30),
			sl: []time.Duration{dms(1), dms(2), dms(3)},
			// (23 − 0) − 3 × 5
			so: opt{dms(8), true},
		},
		{name: "stream paced slower than read", tl: tlStream, interval: dms(10),
			ttls: opt{0, false}, wo: opt{0, false}, ttc: dms(30),
			sl: []time.Duration{dms(1), dms(2), dms(3)}, so: opt{dms(-7), true},
		},
		{name: "hook", tl: tlHook,
			ttfs: opt{dms(2), true}, ttls: opt{dms(8), true}, wo: opt{dms(6), true}, ttc: dms(9),
			resume: []time.Duration{dms(2)},
		},
		{name: "unfinished run counts elapsed time", tl: tlUnfinished,
			ttfs: opt{dms(1), true}, ttls: opt{dms(100), true}, wo: opt{dms(1), true}, ttc: dms(100),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := tc.tl
			if d, ok := TimeToFirstStep(&tl); d != tc.ttfs.d || ok != tc.ttfs.ok {
				t.Errorf("TTFS = %v, %v; want %v, %v", d, ok, tc.ttfs.d, tc.ttfs.ok)
			}
			if d, ok := TimeToLastStep(&tl); d != tc.ttls.d || ok != tc.ttls.ok {
				t.Errorf("TTLS = %v, %v; want %v, %v", d, ok, tc.ttls.d, tc.ttls.ok)
			}
			if d, ok := WorkflowOverhead(&tl); d != tc.wo.d || ok != tc.wo.ok {
				t.Errorf("WO = %v, %v; want %v, %v", d, ok, tc.wo.d, tc.wo.ok)
			}
			if d := TimeToCompletion(&tl); d != tc.ttc {
				t.Errorf("TTC = %v; want %v", d, tc.ttc)
			}
			if got := BranchSkews(&tl); !slices.Equal(got, tc.skews) {
				t.Errorf("skew = %v; want %v", got, tc.skews)
			}
			if got := BranchOffsets(&tl); !slices.Equal(got, tc.offsets) {
				t.Errorf("skew offsets = %v; want %v", got, tc.offsets)
			}
			if got := StepGaps(&tl); !slices.Equal(got, tc.gaps) {
				t.Errorf("STSO = %v; want %v", got, tc.gaps)
			}
			if got := StreamLatencies(&tl); !slices.Equal(got, tc.sl) && len(got)+len(tc.sl) > 0 {
				t.Errorf("SL = %v; want %v", got, tc.sl)
			}
			if d, ok := StreamOverhead(&tl, tc.interval); d != tc.so.d || ok != tc.so.ok {
				t.Errorf("SO = %v, %v; want %v, %v", d, ok, tc.so.d, tc.so.ok)
			}
			if got := ResumeLatencies(&tl); !slices.Equal(got, tc.resume) {
				t.Errorf("resume_to_step = %v; want %v", got, tc.resume)
			}
		})
	}
}

// TestRaceGapFromTheWinner: the stage after a race starts when its first
// step ends; the losers end later, and a slower loser must not shrink (or
// turn negative) the gap the run waited.
func TestRaceGapFromTheWinner(t *testing.T) {
	tl := RunTimeline{T0: 0, Finished: true, Done: dms(13), Steps: []engine.StepSpan{
		sp(0, 0, 0, 1, 3, true, 1),
		sp(0, 1, 1, 2, 8, false, 1),
		sp(0, 2, 2, 2, 12, false, 1),
		sp(1, 0, 3, 5, 6, true, 1),
	}}
	if got, want := StepGaps(&tl, 0), []Gap{{1, dms(5 - 3), true}}; !slices.Equal(got, want) {
		t.Errorf("STSO after a race = %v; want %v", got, want)
	}
	if got, want := StepGaps(&tl), []Gap{{1, dms(5 - 12), true}}; !slices.Equal(got, want) {
		t.Errorf("STSO after a stage that waits for all = %v; want %v", got, want)
	}
	if got := Races(engine.Program{Stages: []engine.Stage{{Kind: engine.StageSteps, Steps: 4, Race: true}, {Kind: engine.StageSteps, Steps: 1}}}); !slices.Equal(got, []int{0}) {
		t.Errorf("Races = %v; want [0]", got)
	}
}

// TestWorkflowOverheadOffTheCriticalSteps: WO is the time on [t0, latest
// step end] that the critical steps' intervals leave uncovered — every step
// of a sequence; in a stage of parallel steps only the one the run waited
// for (the last to end; a race's first, when a stage follows it). Times in
// ms; steps are given in stage order.
func TestWorkflowOverheadOffTheCriticalSteps(t *testing.T) {
	type iv struct {
		stage      int
		start, end float64
	}
	tests := []struct {
		name  string
		t0    float64
		steps []iv
		races []int
		want  float64
	}{
		{"sequence with gaps: the span less the bodies", 0,
			[]iv{{0, 1, 2}, {1, 4, 5}, {2, 8, 9}, {3, 13, 14}}, nil, 14 - 4},
		{"one step", 3, []iv{{0, 5, 9}}, nil, 2},
		{"full overlap counts once", 0, []iv{{0, 2, 10}, {0, 2, 10}, {0, 2, 10}}, nil, 2},
		{"a fan-out waits for its last branch: the time until it started", 0,
			[]iv{{0, 1, 5}, {0, 3, 8}, {0, 7, 9}, {0, 12, 14}}, nil, 12},
		{"the same branches reported out of order", 0,
			[]iv{{0, 12, 14}, {0, 7, 9}, {0, 1, 5}, {0, 3, 8}}, nil, 12},
		{"a branch that took longer but not last changes nothing", 0,
			[]iv{{0, 1, 11}, {0, 3, 8}, {0, 7, 9}, {0, 12, 14}}, nil, 12},
		{"nested intervals: the outer one ended last", 0, []iv{{0, 1, 10}, {0, 2, 3}, {0, 4, 9}}, nil, 1},
		{"stages: the last to end of each", 0,
			[]iv{{0, 1, 6}, {0, 2, 4}, {1, 9, 10}, {1, 10, 11}}, nil, 11 - (5 + 1)},
		{"a critical step overlapping the one before counts once", 0,
			[]iv{{0, 1, 6}, {1, 5, 7}}, nil, 7 - 6},
		{"after a race, its first to end", 0,
			[]iv{{0, 1, 3}, {0, 1, 4.5}, {1, 5, 7}}, []int{0}, 7 - (2 + 2)},
		{"the same stage waited for in full: its last to end", 0,
			[]iv{{0, 1, 3}, {0, 1, 4.5}, {1, 5, 7}}, nil, 7 - (3.5 + 2)},
		{"a race loser that ended last is the critical step", 0,
			[]iv{{0, 1, 3}, {0, 2, 12}, {1, 5, 6}}, []int{0}, 2},
		{"a body starting before t0 counts from t0", 5, []iv{{0, 2, 7}, {1, 9, 10}}, nil, 5 - (2 + 1)},
		{"a body over before t0 covers nothing", 5, []iv{{0, 1, 3}, {1, 6, 8}}, nil, 3 - 2},
		{"zero-length bodies cover nothing", 0, []iv{{0, 2, 2}, {1, 5, 5}}, nil, 5},
		{"a zero-length body between two", 0, []iv{{0, 1, 3}, {1, 4, 4}, {2, 6, 8}}, nil, 8 - 4},
		{"every step ended before t0: negative, a clock step", 10, []iv{{0, 2, 4}}, nil, -6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := RunTimeline{T0: dms(tc.t0), Finished: true}
			for i, s := range tc.steps {
				tl.Steps = append(tl.Steps, sp(s.stage, i, i, s.start, s.end, false, 1))
			}
			if d, ok := WorkflowOverhead(&tl, tc.races...); d != dms(tc.want) || !ok {
				t.Errorf("WO = %v, %v; want %v", d, ok, dms(tc.want))
			}
		})
	}
}

func TestStepsMergesRedeliveries(t *testing.T) {
	got := Steps(&tlRedeliver)
	want := []Step{
		{Stage: 0, Index: 0, Seq: 0, Start: dms(1), End: dms(2), Executions: 1},
		{Stage: 1, Index: 0, Seq: 1, Start: dms(3), End: dms(11), Executions: 2},
		{Stage: 2, Index: 0, Seq: 2, Start: dms(12), End: dms(13), Inline: true, Executions: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Steps = %+v\nwant %+v", got, want)
	}
}

func TestCollect(t *testing.T) {
	failed := RunTimeline{ID: "failed", T0: 0, Finished: true, Failed: true, Done: dms(3), Error: "step 0: boom",
		Steps: []engine.StepSpan{sp(0, 0, 0, 1, 2, false, 1)}}
	tls := []RunTimeline{tlFanout, tlSeq, tlRedeliver, tlNegative, tlStream, tlHook, tlUnfinished, failed}
	c := Collect(tls, Config{ChunkInterval: dms(5), Stall: StallRule{Floor: dms(50)}})

	us := func(v ...float64) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x * 1000)
		}
		return out
	}
	want := map[string]Samples{
		// fanout, seq, redeliver, neg (clamped), hook, stuck
		TTFS: {Values: us(1, 1, 1, 0, 2, 1), Negative: 1},
		TTLS: {Values: us(10, 14, 13, 3, 8, 100)},
		// fanout, seq, redeliver, neg, hook; stuck left out (unfinished)
		WO:         {Values: us(1, 10, 3, 0, 6)},
		TTC:        {Values: us(15, 15, 14, 4, 30, 9, 100)},
		Skew:       {Values: us(4)},
		SkewOffset: {Values: us(1, 4, 0)},
		STSO:       {Values: us(2, 3, 4, 1, 1)},
		STSOInline: {Values: us(2, 4, 1)},
		STSOQueue:  {Values: us(3, 1)},
		SL:         {Values: us(1, 2, 3)},
		SO:         {Values: us(8)},
		// hook at 5, next step at 7
		ResumeToStep: {Values: us(2)},
		// earliest step end − t0: fanout, seq, redeliver, neg, hook, stuck
		FirstEnd: {Values: us(3, 2, 2, 3, 3, 2)},
		// the stream's chunks, 1, 2 and 3 ms on their trips
		CRTTFirst: {Values: us(1)},
		CRTTEarly: {Values: us(2, 3)},
		CDV:       {Values: us(1)},
	}
	for name, w := range want {
		got := c.Samples[name]
		if got == nil {
			t.Errorf("%s: no samples", name)
			continue
		}
		if !slices.Equal(got.Values, w.Values) || got.Negative != w.Negative {
			t.Errorf("%s = %v (neg %d); want %v (neg %d)", name, got.Values, got.Negative, w.Values, w.Negative)
		}
	}
	for name := range c.Samples {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected metric %s", name)
		}
	}
	if c.Runs != len(tls) {
		t.Errorf("Runs = %d", c.Runs)
	}
	if len(c.Failed) != 1 || c.Failed[0] != (FailedRun{"failed", "step 0: boom"}) {
		t.Errorf("Failed = %+v", c.Failed)
	}
	// median TTLS of finished runs {3,8,10,13,14} = 10 ms → 10× = 100 ms;
	// the unfinished run is a stall regardless of the threshold.
	if c.Threshold != dms(100) {
		t.Errorf("Threshold = %v", c.Threshold)
	}
	if len(c.Stalls) != 1 || c.Stalls[0] != (Stall{Run: "stuck", TTLS: dms(100)}) {
		t.Errorf("Stalls = %+v", c.Stalls)
	}
	// Gaps (stage, µs): (1,2000) (2,3000) (3,4000) (1,1000) (2,1000):
	// mean x 1.8, mean y 2200, Σdxdy 3200, Σdx² 2.8 → 1142.857 µs per stage.
	if want := 3200 / 2.8; !c.HasSlope || math.Abs(c.STSOSlope-want) > 1e-9 {
		t.Errorf("STSO slope = %v, %v; want %v", c.STSOSlope, c.HasSlope, want)
	}
}

func TestCollectStalls(t *testing.T) {
	run := func(id string, ttls time.Duration) RunTimeline {
		return RunTimeline{ID: id, Finished: true, Done: ttls + ms,
			Steps: []engine.StepSpan{{Start: ms / 2, End: ttls}}}
	}
	var tls []RunTimeline
	for i := range 9 {
		tls = append(tls, run(string(rune('a'+i)), time.Second+time.Duration(i)*ms))
	}
	// A 306 s outlier: one redelivery after a 300 s visibility timeout.
	tls = append(tls, run("slow", 306*time.Second))
	tls = append(tls, RunTimeline{ID: "cut", Cut: 400 * time.Second})
	c := Collect(tls, Config{Stall: StallRule{VisibilityTimeout: 300 * time.Second}})
	// median (nearest rank, 10 finished runs) 1.004 s → min(10.04 s, 1 s + 270 s)
	if c.Threshold != 10*(time.Second+4*ms) {
		t.Errorf("Threshold = %v", c.Threshold)
	}
	want := []Stall{{Run: "slow", TTLS: 306 * time.Second, Finished: true}, {Run: "cut", TTLS: 400 * time.Second}}
	if !slices.Equal(c.Stalls, want) {
		t.Errorf("Stalls = %+v; want %+v", c.Stalls, want)
	}
	// The stalled runs stay in the numbers.
	if n := len(c.Samples[TTLS].Values); n != 11 {
		t.Errorf("TTLS samples = %d; want 11", n)
	}
}

func TestStallRuleFor(t *testing.T) {
	tests := []struct {
		name            string
		rule            StallRule
		fastest, median time.Duration
		want            time.Duration
	}{
		{"explicit wins", StallRule{Threshold: 5 * time.Second, VisibilityTimeout: time.Second}, time.Second, time.Second, 5 * time.Second},
		{"10x median", StallRule{}, time.Second, time.Second, 10 * time.Second},
		{"10x median below fastest+VT", StallRule{VisibilityTimeout: 300 * time.Second}, time.Second, time.Second, 10 * time.Second},
		{"fastest+0.9VT below 10x median", StallRule{VisibilityTimeout: 2 * time.Second}, time.Second, time.Second, 2800 * time.Millisecond},
		{"most runs stalled: anchored on the fastest", StallRule{VisibilityTimeout: 3 * time.Second}, 20 * time.Millisecond, 3 * time.Second, 2720 * time.Millisecond},
		{"default floor", StallRule{}, time.Millisecond, time.Millisecond, DefaultStallFloor},
		{"custom floor", StallRule{Floor: time.Millisecond}, 100 * time.Microsecond, 200 * time.Microsecond, 2 * time.Millisecond},
		{"no finished runs", StallRule{}, 0, 0, DefaultStallFloor},
	}
	for _, tc := range tests {
		if got := tc.rule.For(tc.fastest, tc.median); got != tc.want {
			t.Errorf("%s: For(%v, %v) = %v; want %v", tc.name, tc.fastest, tc.median, got, tc.want)
		}
	}
}

func TestSlope(t *testing.T) {
	// STSO(i) = 7.3 ms + 0.074 ms · i, the reference's sequential finding.
	var xs, ys []float64
	for i := 1; i <= 50; i++ {
		xs = append(xs, float64(i))
		ys = append(ys, 7300+74*float64(i))
	}
	if s, ok := Slope(xs, ys); !ok || s < 73.999 || s > 74.001 {
		t.Errorf("Slope = %v, %v; want 74", s, ok)
	}
	if _, ok := Slope([]float64{3, 3}, []float64{1, 2}); ok {
		t.Error("Slope of one distinct x reported ok")
	}
	if _, ok := Slope(nil, nil); ok {
		t.Error("Slope of nothing reported ok")
	}
}

func TestDefinitionsCoverEveryMetric(t *testing.T) {
	names := []string{TTFS, TTLS, Skew, SkewOffset, STSO, STSOInline, STSOQueue, WO, TTC, SL, SO, ResumeToStep, DriverLag,
		FirstEnd, CRTTFirst, CRTTEarly, CRTTLate, CDV, WriteSlip, ReadRate, WriteRate}
	seen := map[string]bool{}
	for _, d := range Definitions {
		if seen[d.Name] {
			t.Errorf("%s defined twice", d.Name)
		}
		seen[d.Name] = true
		if d.Short == "" || d.Title == "" || d.Definition == "" || d.Sample == "" || d.Unit != Microseconds || d.Why == "" {
			t.Errorf("%s: incomplete definition %+v", d.Name, d)
		}
		if d.Better != Lower && d.Better != Informational {
			t.Errorf("%s: better is %q, want %q or %q", d.Name, d.Better, Lower, Informational)
		}
	}
	for _, n := range names {
		if _, ok := Lookup(n); !ok {
			t.Errorf("%s has no definition", n)
		}
	}
	if len(Definitions) != len(names) {
		t.Errorf("%d definitions for %d names", len(Definitions), len(names))
	}
}

func TestBetterOf(t *testing.T) {
	for name, want := range map[string]Direction{TTLS: Lower, WO: Lower, Skew: Informational, SkewOffset: Informational,
		ReadRate: Informational, "op.run_get": Lower} {
		if got := BetterOf(name); got != want {
			t.Errorf("BetterOf(%q) = %q; want %q", name, got, want)
		}
	}
}
