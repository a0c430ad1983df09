// Package metrics turns engine-side timelines into latency samples: the
// Recorder (an engine.Observer) keeps one RunTimeline per run, pure functions
// derive each metric of DESIGN.md §6 from a timeline, Collect gathers a
// cell's samples and stalls, and Histogram holds samples in HDR form
// (1 µs .. 1 h, 3 significant figures).
//
// Every metric is defined once, in Definitions; the README and the report
// footer quote that table.
package metrics

import (
	"math"
	"slices"
)

// Metric names, as keys of results.Cell.Metrics.
const (
	TTFS         = "ttfs"
	TTLS         = "ttls"
	Skew         = "skew"
	SkewOffset   = "skew_offset"
	STSO         = "stso"
	STSOInline   = "stso_inline"
	STSOQueue    = "stso_queue"
	WO           = "wo"
	TTC          = "ttc"
	SL           = "sl"
	SO           = "so"
	ResumeToStep = "resume_to_step"
	FirstEnd     = "first_end"
	CRTTFirst    = "crtt_first"
	CRTTEarly    = "crtt_early"
	CRTTLate     = "crtt_late"
	CDV          = "cdv"
	WriteSlip    = "write_slip"
	ReadRate     = "read_rate"
	WriteRate    = "write_rate"
	// DriverLag is not derived from a timeline: the driver measures actual −
	// scheduled start of each run (open-loop pacing).
	DriverLag = "driver_lag"
)

// Unit is the unit of a metric's samples.
type Unit string

// Microseconds is the unit of every latency sample.
const Microseconds Unit = "us"

// Def defines one metric.
type Def struct {
	// Name is the key in results files ("ttfs").
	Name string
	// Short is the label in tables ("TTFS").
	Short string
	// Title names the metric in words.
	Title string
	// Definition is the exact formula, as the report footer prints it.
	Definition string
	// Sample says what one sample is (one per run, per branch, ...).
	Sample string
	Unit   Unit
	// Better is which way a change is an improvement: Lower, or
	// Informational for a metric that can fall when the engine only got
	// slower. Compare's verdicts and the reports' marks follow it.
	Better Direction
	// Why says why a slower engine cannot lower the metric (Lower), or
	// how it can (Informational).
	Why string
}

// Direction is which way a change of a metric is an improvement.
type Direction string

const (
	// Lower: lower is better. The metric is a time from an anchor that a
	// slower engine cannot move later (t0, a hook's resume, a chunk's
	// write), or a gap that ends at the event its start causes: a delay
	// before the gap moves both ends. (One op made slower can still make
	// another path truly faster — less contention for a shared pool, a
	// shorter log to load — and such a metric shows it; the definition
	// adds no gain of its own.)
	Lower Direction = "lower"
	// Informational: shown, never judged better or worse. The metric is a
	// difference between two events neither of which waits for the other
	// (two branches' starts, two chunks' reads): a delay of the earlier
	// one alone lowers it, so it can fall when the engine only got slower.
	Informational Direction = "informational"
)

// Definitions lists every metric in report order. All times are engine-side
// on the world's Runtime clock; t0 is the run's scheduled start.
var Definitions = []Def{
	{TTFS, "TTFS", "time to first step",
		"earliest step body start − t0", "run", Microseconds,
		Lower, "a time since t0: a slower engine starts the first body no earlier"},
	{TTLS, "TTLS", "time to last step",
		"latest step end (step_completed written) − t0; a run unfinished at the cell timeout counts the elapsed time (timeout − t0)", "run", Microseconds,
		Lower, "a time since t0"},
	{FirstEnd, "first end", "time to first step end",
		"earliest step end (step_completed written) − t0: a fan-out's or race's first branch to finish (TTFS is the first to start)", "run", Microseconds,
		Lower, "a time since t0"},
	{Skew, "skew", "branch start skew",
		"latest branch body start − earliest branch body start, per parallel stage (a stage of ≥ 2 steps)", "run × parallel stage", Microseconds,
		Informational, "two branches' starts, neither waiting for the other: delaying the earliest branch alone lowers it (a slower step_created holds back the inline branch: −25 % on the sim world)"},
	{SkewOffset, "skew offset", "branch start offset",
		"each branch's body start − the earliest branch body start of its stage", "branch", Microseconds,
		Informational, "as skew: a delay of the stage's earliest branch lowers every other branch's offset"},
	{STSO, "STSO", "step-to-step overhead",
		"earliest body start of stage i − the end of stage i−1: its latest step end, a race's earliest (the end the run went on from; sequential: step[i].start − step[i−1].end); its least-squares slope over i is reported as µs per step", "stage transition", Microseconds,
		Lower, "stage i starts after the end it waits for, so a delay before that end moves both"},
	{STSOInline, "STSO inline", "step-to-step overhead, inline",
		"STSO where step[i] ran inline in the orchestrator right after dispatch", "stage transition", Microseconds,
		Lower, "as STSO, over the inline transitions (a shift between inline and queue-hop shows in STSO)"},
	{STSOQueue, "STSO queue-hop", "step-to-step overhead, queue hop",
		"STSO where step[i] was reached through a queue delivery", "stage transition", Microseconds,
		Lower, "as STSO, over the queue-hop transitions (a shift between inline and queue-hop shows in STSO)"},
	{WO, "WO", "workflow overhead",
		"time in [t0, latest step end] when none of the steps the run waited for is executing: the step that ended last and, for each earlier stage, the step whose end let the run go on (its last to end; a race's first), their intervals (body start → step_completed written) merged where they overlap (a sequence: (latest step end − t0) − Σ step durations; a fan-out: the last branch's body start − t0)", "run", Microseconds,
		Lower, "the time before and between the steps the run waited for, each of which waits for the one before: a slower step moves its end and what waits for it alike"},
	{TTC, "TTC", "time to completion",
		"run's terminal event written − t0; a run unfinished at the cell timeout counts the elapsed time", "run", Microseconds,
		Lower, "a time since t0"},
	{SL, "SL", "stream latency",
		"chunk read − chunk written", "chunk", Microseconds,
		Lower, "the read follows the write it reads, timed from the write call"},
	{SO, "SO", "stream overhead",
		"(last chunk read − first chunk written) − chunks × pacing interval", "run", Microseconds,
		Lower, "the reads follow the writes, and the pacing is fixed"},
	{CRTTFirst, "CRTT 0", "chunk round trip, first chunk",
		"chunk read − chunk written, for chunk 0", "run", Microseconds,
		Lower, "as SL"},
	{CRTTEarly, "CRTT 1–20", "chunk round trip, chunks 1–20",
		"chunk read − chunk written, for chunks 1 to 20", "chunk", Microseconds,
		Lower, "as SL"},
	{CRTTLate, "CRTT 21+", "chunk round trip, chunks 21 on",
		"chunk read − chunk written, for chunks 21 and later", "chunk", Microseconds,
		Lower, "as SL"},
	{CDV, "CDV", "chunk delay variation",
		"max over i ≥ 1 of CRTT[i] − CRTT[i−1], chunks in index order, at least 0: one stalled chunk is its run's CDV", "run", Microseconds,
		Lower, "a rise of the round trip from one chunk to the next, read after it: a slowdown of every chunk leaves it, a stall raises it"},
	{WriteSlip, "write slip", "writer lateness",
		"max over chunks of chunk written − (writer body start + the chunk's due offset at the cadence's speed, or index × interval)", "run", Microseconds,
		Lower, "each write against the writer's own schedule, from its body start"},
	{ReadRate, "read µs/KiB", "sustained read rate (inverse)",
		"(read of the window's last chunk − read of its first) × 1024 / bytes of the window's chunks after its first; the window drops the first and last 10% of chunks (⌊n/10⌋ each); lower is faster: KiB/s = 10⁶ / value", "run", Microseconds,
		Informational, "a time between two chunks of the window: a stream that falls behind before the window and catches up within it reads faster (a slower stream_read: −0.2 % on the sim world)"},
	{WriteRate, "write µs/KiB", "sustained write rate (inverse)",
		"as read µs/KiB, on the chunks' write times", "run", Microseconds,
		Informational, "as read µs/KiB: a writer late at the window's start that catches up within it writes faster"},
	{ResumeToStep, "resume→step", "hook resume to next step",
		"earliest step body start at or after the hook's resume − the resume", "hook", Microseconds,
		Lower, "a time since the resume, which the driver makes"},
	{DriverLag, "driver lag", "driver start lag",
		"actual run start − scheduled start (open-loop pacing; large values mean the driver fell behind). Through the protocol the run starts when its start leaves the driver: a batched start's wait for one of the session's senders, or a streamed start's for the stream, counts here; a start sent ahead to a target that holds it until its schedule (protocol 1.3) has none unless it left after its schedule", "run", Microseconds,
		Lower, "a time since the scheduled start"},
}

// Conventions are the rules shared by every metric, printed under the table.
var Conventions = []string{
	"A step body that ran more than once (redelivery) counts once: its first body start and its last step end (step_completed written).",
	"Negative samples (a clock step) are clamped to 0 and counted as `<0 (skew)`.",
	"Percentiles are nearest-rank over the per-sample values: sorted[min(n−1, ⌈q/100·n⌉−1)].",
	"Failed runs are counted as errors and listed; they contribute no latency samples.",
	"A stall is a run unfinished at the cell timeout, or one whose TTLS exceeds the stall threshold: " +
		"the explicit threshold when set, else min(10 × median TTLS, fastest TTLS + 0.9 × visibility timeout), never below " +
		DefaultStallFloor.String() + ".",
}

// Statistic is what compare and gate test a metric on. Their tests take
// the run as the unit that varies: the runs of a cell are independent, the
// samples of one run are not (its steps share its backend, its cold start,
// its log length). A metric with one sample per run is tested on that
// sample; one with several is tested on one aggregate per run.
type Statistic string

// Statistics a metric is tested on.
const (
	// RunValue: the metric has one sample per run, tested as it is.
	RunValue Statistic = "run value"
	// RunMedian: the median of the run's samples (nearest rank).
	RunMedian Statistic = "run median"
	// RunMean: the mean of the run's samples, for figures that add up over
	// a run (its STSO total is the mean × its transitions).
	RunMean Statistic = "run mean"
)

// testedOn declares the statistic of a metric whose default does not fit.
// The default (Def.Tested) is RunValue for a metric with one sample per run
// ("run") and RunMedian for every other: a new metric gets a per-run test
// by declaring its Sample, and overrides it here.
var testedOn = map[string]Statistic{
	STSO:       RunMean,
	STSOInline: RunMean,
	STSOQueue:  RunMean,
}

// bimodal lists the metrics whose runs fall into two modes (TTFS: the
// first step reached inline or through a queue hop, in the same cell):
// their fastest run moves by hundreds of percent on a no-op change, so
// compare also tests the share of runs in the fast mode, as a proportion.
var bimodal = map[string]bool{TTFS: true}

// Bimodal reports whether the metric name has a fast and a slow mode.
func Bimodal(name string) bool { return bimodal[name] }

// Tested is the statistic compare and gate test d on (see Statistic).
func (d Def) Tested() Statistic {
	if s, ok := testedOn[d.Name]; ok {
		return s
	}
	if d.Sample == "run" {
		return RunValue
	}
	return RunMedian
}

// TestedOn is the statistic of the metric name (Def.Tested); a name
// without a definition is taken to have several samples per run.
func TestedOn(name string) Statistic {
	d, ok := Lookup(name)
	if !ok {
		d = Def{Name: name}
	}
	return d.Tested()
}

// Of returns the statistic of one run's samples (µs); ok is false when the
// run has none. RunValue is the first sample.
func (s Statistic) Of(values []int64) (v int64, ok bool) {
	if len(values) == 0 {
		return 0, false
	}
	switch s {
	case RunMean:
		var sum float64
		for _, x := range values {
			sum += float64(x)
		}
		return int64(math.Round(sum / float64(len(values)))), true
	case RunMedian:
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		return Quantile(sorted, 50), true
	}
	return values[0], true
}

// BetterOf is the direction of the metric name (Def.Better); a name
// without a definition is taken to be a latency: Lower.
func BetterOf(name string) Direction {
	if d, ok := Lookup(name); ok && d.Better != "" {
		return d.Better
	}
	return Lower
}

// Lookup returns the definition of name.
func Lookup(name string) (Def, bool) {
	for _, d := range Definitions {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}
