package metrics

import (
	"slices"
	"time"

	"github.com/durabench/durabench/engine"
)

// DefaultStallFloor is the smallest default stall threshold: on a fast world
// (mem, TTLS of a few hundred µs) 10× the median is a GC pause, not a stall a
// user would notice.
const DefaultStallFloor = 100 * time.Millisecond

// StallRule decides which runs of a cell are stalls. An unfinished run is
// always a stall; a finished, successful run is a stall when its TTLS exceeds
// the threshold.
type StallRule struct {
	// Threshold, when > 0, is the threshold and the other fields are ignored.
	Threshold time.Duration
	// VisibilityTimeout is the world's queue visibility timeout (0: unknown).
	// A run that waited for a redelivery took at least the fastest run's
	// TTLS plus most of a visibility timeout, so the default threshold never
	// exceeds fastest + 0.9 × VT. It is anchored on the fastest run, not the
	// median, so the stalls are caught even when most runs of a cell stall
	// (a 64-branch fan-out with 3% failing writes stalls in 86% of runs).
	VisibilityTimeout time.Duration
	// Floor is the smallest default threshold (0: DefaultStallFloor).
	Floor time.Duration
}

// For returns the threshold for a cell whose finished runs have fastest and
// median TTLS: the explicit Threshold when set, else
// max(Floor, min(10 × median, fastest + 0.9 × VisibilityTimeout)).
func (r StallRule) For(fastest, median time.Duration) time.Duration {
	if r.Threshold > 0 {
		return r.Threshold
	}
	t := 10 * median
	if r.VisibilityTimeout > 0 {
		t = min(t, fastest+r.VisibilityTimeout*9/10)
	}
	floor := r.Floor
	if floor <= 0 {
		floor = DefaultStallFloor
	}
	return max(t, floor)
}

// Config parameterises Collect.
type Config struct {
	Stall StallRule
	// ChunkInterval is the stream writer's pacing, for SO.
	ChunkInterval time.Duration
	// Stream is the program's stream stage, for write_slip (the chunks'
	// due offsets) and for the sizes of chunks a target did not report.
	Stream *engine.StreamSpec
	// Races are the program's race stages (Races), which end, for STSO
	// and WO, when their first step ends.
	Races []int
	// NoPaths leaves the critical paths out (Collection.CriticalPath and
	// CompletionPath stay nil): for a caller that reads only the samples,
	// two walks of thousands of spans a run saved.
	NoPaths bool
}

// ProgressBins is how many equal slices of a stream (by chunk index over
// the run's chunk count) the CRTT progress profile has.
const ProgressBins = 10

// CRTTBin is a group of chunk round trips: Key is the progress bin
// (0..ProgressBins−1) or the chunk size in bytes.
type CRTTBin struct {
	Key   int
	Count int
	// Sum is the sum of the round trips, so Sum / Count is their mean.
	Sum time.Duration
}

// Mean is the bin's mean round trip.
func (b CRTTBin) Mean() time.Duration {
	if b.Count == 0 {
		return 0
	}
	return b.Sum / time.Duration(b.Count)
}

// Samples are one metric's samples in microseconds, in run order, negatives
// clamped to 0 and counted.
type Samples struct {
	Values   []int64
	Negative int
	// RunEnds are where each run's samples end in Values (exclusive), one
	// per run that contributed a sample, in run order; Collect sets them.
	RunEnds []int
}

// endRun closes the current run: the values added since the previous
// boundary are its samples. A run that added none leaves no boundary.
func (s *Samples) endRun() {
	last := 0
	if n := len(s.RunEnds); n > 0 {
		last = s.RunEnds[n-1]
	}
	if len(s.Values) > last {
		s.RunEnds = append(s.RunEnds, len(s.Values))
	}
}

// PerRun returns stat of each run's samples, in run order (nil when
// RunEnds is unset).
func (s *Samples) PerRun(stat Statistic) []int64 {
	var out []int64
	start := 0
	for _, end := range s.RunEnds {
		if v, ok := stat.Of(s.Values[start:end]); ok {
			out = append(out, v)
		}
		start = end
	}
	return out
}

// Add appends d in microseconds, clamping a negative value to 0.
func (s *Samples) Add(d time.Duration) {
	if d < 0 {
		s.Negative++
		d = 0
	}
	s.Values = append(s.Values, d.Microseconds())
}

// Stall is a run counted as a stall.
type Stall struct {
	Run string
	// TTLS is the run's TTLS (its elapsed time when it never finished).
	TTLS     time.Duration
	Finished bool
}

// FailedRun is a run that failed.
type FailedRun struct {
	Run   string
	Error string
}

// Collection is everything Collect derives from a cell's timelines.
type Collection struct {
	// Runs is the number of timelines; every one is accounted for as a
	// success, a failure or a stall (a stall may also be a success).
	Runs int
	// Samples maps a metric name to its samples; metrics without samples
	// are absent.
	Samples map[string]*Samples
	// STSOSlope is the least-squares slope of STSO over the stage index in
	// µs per stage, pooled over runs; HasSlope is false when fewer than two
	// distinct stage indexes had a gap.
	STSOSlope float64
	HasSlope  bool
	Failed    []FailedRun
	Stalls    []Stall
	// Threshold is the stall threshold that was applied.
	Threshold time.Duration
	// CriticalPath is, per category (indexed like Categories), each
	// finished run's exclusive time on its critical path in µs, in run
	// order; one run's categories add up exactly to its TTLS sample. Nil
	// when no run's engine reported spans (RunTimeline.HasEngineSpans).
	CriticalPath [][]int64
	// CompletionPath is CriticalPath's split of each finished run's TTC:
	// its path from t0 to its terminal event (RunCompletionPath), its
	// categories adding up exactly to its TTC sample. Nil with
	// CriticalPath.
	CompletionPath [][]int64
	// CRTTProgress is the mean chunk round trip per tenth of the stream,
	// pooled over runs (empty bins are left out); CRTTBySize the same by
	// chunk size in bytes, ascending. Both are empty without chunks.
	CRTTProgress, CRTTBySize []CRTTBin
}

// Collect computes every metric the timelines support, in run order.
//
// Failed runs are counted in Failed and contribute no samples: a failure
// fast path must not make latencies look better. An unfinished run
// contributes TTLS = TTC = elapsed at the cut (lower bounds), plus the
// per-event samples it produced (TTFS, STSO, SL, resume_to_step); the
// whole-run shapes (skew, WO, SO) need a finished run and are left out.
func Collect(tls []RunTimeline, cfg Config) Collection {
	c := Collection{Runs: len(tls), Samples: map[string]*Samples{}}
	add := func(name string, d time.Duration) {
		s := c.Samples[name]
		if s == nil {
			s = &Samples{}
			c.Samples[name] = s
		}
		s.Add(d)
	}
	var xs, ys []float64
	var okTTLS []time.Duration
	spans := false
	for i := range tls {
		spans = spans || tls[i].HasEngineSpans()
	}
	for i := range tls {
		for _, s := range c.Samples {
			s.endRun() // the previous run's samples
		}
		t := &tls[i]
		if t.Failed {
			msg := t.Error
			if msg == "" {
				msg = "run failed"
			}
			c.Failed = append(c.Failed, FailedRun{Run: t.ID, Error: msg})
			continue
		}
		if d, ok := TimeToFirstStep(t); ok {
			add(TTFS, d)
		}
		if d, ok := TimeToLastStep(t); ok {
			add(TTLS, d)
			if t.Finished {
				okTTLS = append(okTTLS, d)
			}
			if !cfg.NoPaths {
				c.addPath(t, d)
			}
		}
		sts := stages(Steps(t))
		for _, g := range stepGaps(sts, cfg.Races) {
			add(STSO, g.Value)
			if g.Inline {
				add(STSOInline, g.Value)
			} else {
				add(STSOQueue, g.Value)
			}
			xs = append(xs, float64(g.Stage))
			ys = append(ys, float64(g.Value)/float64(time.Microsecond))
		}
		ttc := TimeToCompletion(t)
		add(TTC, ttc)
		if !cfg.NoPaths {
			c.addCompletionPath(t, ttc)
		}
		for _, d := range StreamLatencies(t) {
			add(SL, d)
		}
		if d, ok := FirstStepEnd(t); ok {
			add(FirstEnd, d)
		}
		cs := chunksByIndex(t)
		c.profile(cs, cfg.Stream)
		for _, ch := range cs {
			add(CRTTBucket(ch.Index), ch.Read-ch.Written)
		}
		// CDV and write slip of an unfinished run are lower bounds over
		// what it read, as its TTLS is.
		if d, ok := DelayVariation(cs); ok {
			add(CDV, d)
		}
		if d, ok := WriterSlip(t, cs, cfg.Stream); ok {
			add(WriteSlip, d)
		}
		for _, d := range ResumeLatencies(t) {
			add(ResumeToStep, d)
		}
		if !t.Finished {
			continue
		}
		for _, d := range branchSkews(sts) {
			add(Skew, d)
		}
		for _, d := range branchOffsets(sts) {
			add(SkewOffset, d)
		}
		if d, ok := workflowOverhead(t.T0, sts, cfg.Races); ok {
			add(WO, d)
		}
		if d, ok := StreamOverhead(t, cfg.ChunkInterval); ok {
			add(SO, d)
		}
		if r, w, ok := SteadyRates(cs, cfg.Stream); ok {
			add(ReadRate, r)
			add(WriteRate, w)
		}
	}
	for _, s := range c.Samples {
		s.endRun()
	}
	if !spans {
		c.CriticalPath, c.CompletionPath = nil, nil
	}
	c.CRTTProgress = nonEmpty(c.CRTTProgress)
	slices.SortFunc(c.CRTTBySize, func(a, b CRTTBin) int { return a.Key - b.Key })
	c.STSOSlope, c.HasSlope = Slope(xs, ys)

	slices.Sort(okTTLS)
	var fastest, median time.Duration
	if len(okTTLS) > 0 {
		fastest, median = okTTLS[0], okTTLS[min(len(okTTLS)-1, (len(okTTLS)+1)/2-1)]
	}
	c.Threshold = cfg.Stall.For(fastest, median)
	for i := range tls {
		t := &tls[i]
		if t.Failed {
			continue
		}
		d, ok := TimeToLastStep(t)
		if !ok {
			d = t.Elapsed() // a finished run without steps: judge its TTC
		}
		if !t.Finished || d > c.Threshold {
			c.Stalls = append(c.Stalls, Stall{Run: t.ID, TTLS: d, Finished: t.Finished})
		}
	}
	return c
}

// profile adds a run's chunks (in index order) to the CRTT progress and
// size profiles.
func (c *Collection) profile(cs []engine.ChunkSpan, spec *engine.StreamSpec) {
	if len(cs) == 0 {
		return
	}
	n := cs[len(cs)-1].Index + 1
	if spec != nil {
		n = max(n, spec.ChunkCount())
	}
	if c.CRTTProgress == nil {
		c.CRTTProgress = make([]CRTTBin, ProgressBins)
		for i := range c.CRTTProgress {
			c.CRTTProgress[i].Key = i
		}
	}
	for _, ch := range cs {
		rtt := ch.Read - ch.Written
		b := &c.CRTTProgress[min(ProgressBins-1, ch.Index*ProgressBins/n)]
		b.Count++
		b.Sum += rtt
		size := chunkBytes(ch, spec)
		i := slices.IndexFunc(c.CRTTBySize, func(b CRTTBin) bool { return b.Key == size })
		if i < 0 {
			c.CRTTBySize = append(c.CRTTBySize, CRTTBin{Key: size})
			i = len(c.CRTTBySize) - 1
		}
		c.CRTTBySize[i].Count++
		c.CRTTBySize[i].Sum += rtt
	}
}

func nonEmpty(bins []CRTTBin) []CRTTBin {
	return slices.DeleteFunc(bins, func(b CRTTBin) bool { return b.Count == 0 })
}

// Slope is the least-squares slope of ys over xs; ok is false when xs has
// fewer than two distinct values.
func Slope(xs, ys []float64) (slope float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		dx := xs[i] - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// addPath adds a finished run's critical path, its categories in whole
// microseconds adding up to its TTLS sample ttls.
func (c *Collection) addPath(t *RunTimeline, ttls time.Duration) {
	if totals, ok := RunPathTotals(t); ok {
		c.CriticalPath = addTotals(c.CriticalPath, totals, ttls)
	}
}

// addCompletionPath adds a finished run's path to completion, its
// categories in whole microseconds adding up to its TTC sample ttc.
func (c *Collection) addCompletionPath(t *RunTimeline, ttc time.Duration) {
	if totals, ok := RunCompletionPathTotals(t); ok {
		c.CompletionPath = addTotals(c.CompletionPath, totals, ttc)
	}
}

// addTotals appends one run's totals, in whole microseconds adding up to
// sample, to per-category lists (made on the first run).
func addTotals(path [][]int64, totals PathTotals, sample time.Duration) [][]int64 {
	if path == nil {
		path = make([][]int64, NumCategories)
	}
	for i, v := range totals.Micros(max(sample, 0).Microseconds()) {
		path[i] = append(path[i], v)
	}
	return path
}
