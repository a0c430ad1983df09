package metrics

import (
	"cmp"
	"slices"
	"time"

	"github.com/durabench/durabench/engine"
)

// Step is one step of a run with all its executions merged: a redelivered
// step counts once, from its first body start to its last step end (step_completed written).
type Step struct {
	Stage, Index, Seq int
	// Start is the earliest body start, End the latest step end.
	Start, End time.Duration
	// Inline tells how the earliest execution was reached.
	Inline bool
	// Executions is how many times the body ran.
	Executions int
}

// Steps merges t's step executions by Seq, in Seq order.
func Steps(t *RunTimeline) []Step {
	if len(t.Steps) == 0 {
		return nil
	}
	spans := slices.Clone(t.Steps)
	slices.SortFunc(spans, func(a, b engine.StepSpan) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Start, b.Start))
	})
	out := make([]Step, 0, len(spans))
	for _, sp := range spans {
		if n := len(out); n > 0 && out[n-1].Seq == sp.Seq {
			s := &out[n-1]
			s.End = max(s.End, sp.End)
			s.Executions++
			continue
		}
		out = append(out, Step{Stage: sp.Stage, Index: sp.Index, Seq: sp.Seq,
			Start: sp.Start, End: sp.End, Inline: sp.Inline, Executions: 1})
	}
	return out
}

// TimeToFirstStep is TTFS: earliest step body start − t0. ok is false when
// no step body ran.
func TimeToFirstStep(t *RunTimeline) (d time.Duration, ok bool) {
	return earliest(t, func(s engine.StepSpan) time.Duration { return s.Start })
}

// earliest is the earliest at(step) of t's steps − t0. ok is false when
// no step body ran.
func earliest(t *RunTimeline, at func(engine.StepSpan) time.Duration) (d time.Duration, ok bool) {
	if len(t.Steps) == 0 {
		return 0, false
	}
	first := at(t.Steps[0])
	for _, s := range t.Steps[1:] {
		first = min(first, at(s))
	}
	return first - t.T0, true
}

// TimeToLastStep is TTLS: latest step end (step_completed written) − t0. A run that has not
// finished counts the time elapsed until it was given up (Cut − t0), a lower
// bound that keeps stalled runs in the numbers. ok is false for a finished
// run in which no step body ran.
func TimeToLastStep(t *RunTimeline) (d time.Duration, ok bool) {
	if !t.Finished {
		return t.Cut - t.T0, true
	}
	if len(t.Steps) == 0 {
		return 0, false
	}
	last := t.Steps[0].End
	for _, s := range t.Steps[1:] {
		last = max(last, s.End)
	}
	return last - t.T0, true
}

// stages groups merged steps (in Seq order, so stages ascend) into runs of
// one stage each.
func stages(steps []Step) [][]Step {
	var out [][]Step
	for i := 0; i < len(steps); {
		j := i + 1
		for j < len(steps) && steps[j].Stage == steps[i].Stage {
			j++
		}
		out = append(out, steps[i:j])
		i = j
	}
	return out
}

// branchSkews is skew: for each parallel stage (a stage in which two or
// more steps ran), latest branch body start − earliest branch body start. A
// fan-out run has one parallel stage, hence one sample.
func branchSkews(sts [][]Step) []time.Duration {
	var out []time.Duration
	for _, st := range sts {
		if len(st) < 2 {
			continue
		}
		lo, hi := st[0].Start, st[0].Start
		for _, s := range st[1:] {
			lo, hi = min(lo, s.Start), max(hi, s.Start)
		}
		out = append(out, hi-lo)
	}
	return out
}

// branchOffsets is skew_offset: each branch's body start − the earliest
// branch body start of its parallel stage (the earliest branch itself
// contributes 0).
func branchOffsets(sts [][]Step) []time.Duration {
	var out []time.Duration
	for _, st := range sts {
		if len(st) < 2 {
			continue
		}
		lo := st[0].Start
		for _, s := range st[1:] {
			lo = min(lo, s.Start)
		}
		for _, s := range st {
			out = append(out, s.Start-lo)
		}
	}
	return out
}

// Gap is one step-to-step overhead sample.
type Gap struct {
	// Stage is i, the index of the stage whose first body start closes the
	// gap (the x of the STSO slope).
	Stage int
	Value time.Duration
	// Inline is how the step that started stage i was reached.
	Inline bool
}

// stepGaps is STSO: for each stage i whose predecessor i−1 also ran, the
// earliest body start in stage i − the end of stage i−1: its latest step
// end, or for a race (races holds the race stages) its earliest, the end
// the run went on from. In a sequential run (stages of one step) that is
// step[i].start − step[i−1].end. A gap is tagged by how the earliest step
// of stage i was reached.
func stepGaps(st [][]Step, races []int) []Gap {
	var out []Gap
	for k := 1; k < len(st); k++ {
		prev, cur := st[k-1], st[k]
		if cur[0].Stage != prev[0].Stage+1 {
			continue
		}
		end := stageEnd(prev, slices.Contains(races, prev[0].Stage))
		first := cur[0]
		for _, s := range cur[1:] {
			if s.Start < first.Start {
				first = s
			}
		}
		out = append(out, Gap{Stage: first.Stage, Value: first.Start - end, Inline: first.Inline})
	}
	return out
}

// stageEnd is when a stage let the run go on: its latest step end, or a
// race's earliest. A race's losers still run and end later, but nothing
// after the race waits for them.
func stageEnd(st []Step, race bool) time.Duration {
	end := st[0].End
	for _, s := range st[1:] {
		if race {
			end = min(end, s.End)
		} else {
			end = max(end, s.End)
		}
	}
	return end
}

// Races lists the stages of p that complete with their first step
// (engine.Stage.Race): Config.Races.
func Races(p engine.Program) []int {
	var out []int
	for i, s := range p.Stages {
		if s.Race {
			out = append(out, i)
		}
	}
	return out
}

// workflowOverhead is WO: the time on [t0, latest step end] when none of
// the run's critical steps is executing. The critical steps are the step
// that ended last and, for each earlier stage, the step whose end let the
// run go on (stageEnd: its last to end, a race's first); their intervals,
// from first body start to last end, are merged where they overlap and
// clipped to the span. In a sequence every step is critical, and WO is the
// span less the sum of the step durations.
//
// A fan-out's branches are not all critical: the run waited for the last
// one, so WO is the time until that branch's body started. Counting every
// branch (a span less their sum, or less their union) would let a branch
// that merely took longer hide dispatch time that the last branch still
// waited: a slower engine would read as less overhead. ok is false when no
// step body ran.
func workflowOverhead(t0 time.Duration, sts [][]Step, races []int) (d time.Duration, ok bool) {
	if len(sts) == 0 {
		return 0, false
	}
	crit := criticalSteps(sts, races)
	last := crit[0].End
	if last <= t0 {
		return last - t0, true // a clock step: Collect counts it as negative
	}
	slices.SortFunc(crit, func(a, b Step) int { return cmp.Compare(a.Start, b.Start) })
	// covered sums the union of the intervals within [t0, last]; at is the
	// covered frontier, so no time is counted twice.
	var covered time.Duration
	at := t0
	for _, s := range crit {
		lo, hi := max(s.Start, at), min(s.End, last)
		if hi > lo {
			covered += hi - lo
			at = hi
		}
	}
	return last - t0 - covered, true
}

// criticalSteps are the steps the run waited for, the last first: the step
// that ended last, then for each earlier stage (of sts, in stage order, not
// empty) the step whose end let the run go on.
func criticalSteps(sts [][]Step, races []int) []Step {
	var lastSt, lastI int
	for k, st := range sts {
		for i, s := range st {
			if s.End > sts[lastSt][lastI].End {
				lastSt, lastI = k, i
			}
		}
	}
	out := []Step{sts[lastSt][lastI]}
	for k := lastSt - 1; k >= 0; k-- {
		race := slices.Contains(races, sts[k][0].Stage)
		end := stageEnd(sts[k], race)
		i := slices.IndexFunc(sts[k], func(s Step) bool { return s.End == end })
		out = append(out, sts[k][i])
	}
	return out
}

// TimeToCompletion is TTC: the run's terminal event − t0; for a run that has
// not finished, the time elapsed until it was given up (Cut − t0).
func TimeToCompletion(t *RunTimeline) time.Duration { return t.Elapsed() }

// StreamLatencies is SL: chunk read − chunk written, per chunk.
func StreamLatencies(t *RunTimeline) []time.Duration {
	out := make([]time.Duration, 0, len(t.Chunks))
	for _, c := range t.Chunks {
		out = append(out, c.Read-c.Written)
	}
	return out
}

// StreamOverhead is SO: (last chunk read − first chunk written) − chunks ×
// interval, where interval is the writer's pacing. ok is false when no chunk
// was read.
func StreamOverhead(t *RunTimeline, interval time.Duration) (d time.Duration, ok bool) {
	if len(t.Chunks) == 0 {
		return 0, false
	}
	first, last := t.Chunks[0].Written, t.Chunks[0].Read
	for _, c := range t.Chunks[1:] {
		first, last = min(first, c.Written), max(last, c.Read)
	}
	return last - first - time.Duration(len(t.Chunks))*interval, true
}

// ResumeLatencies is resume_to_step: for each resumed hook, the earliest
// step body start at or after the resume − the resume. A hook with no step
// after its resume contributes nothing.
func ResumeLatencies(t *RunTimeline) []time.Duration {
	var out []time.Duration
	for _, h := range t.Hooks {
		if !h.WasResumed {
			continue
		}
		found, next := false, time.Duration(0)
		for _, s := range t.Steps {
			if s.Start >= h.Resumed && (!found || s.Start < next) {
				found, next = true, s.Start
			}
		}
		if found {
			out = append(out, next-h.Resumed)
		}
	}
	return out
}

// FirstStepEnd is first_end: earliest step end (step_completed written) −
// t0. ok is false when no step body ran.
func FirstStepEnd(t *RunTimeline) (d time.Duration, ok bool) {
	return earliest(t, func(s engine.StepSpan) time.Duration { return s.End })
}

// CRTT bucket bounds: chunk 0 is crtt_first, chunks 1..EarlyChunks are
// crtt_early, the rest crtt_late.
const EarlyChunks = 20

// CRTTBucket is the metric a chunk's round trip counts in, by its index.
func CRTTBucket(index int) string {
	switch {
	case index == 0:
		return CRTTFirst
	case index <= EarlyChunks:
		return CRTTEarly
	}
	return CRTTLate
}

// chunksByIndex is t's chunks in index order, each index once (the first
// read of it).
func chunksByIndex(t *RunTimeline) []engine.ChunkSpan {
	cs := slices.Clone(t.Chunks)
	slices.SortStableFunc(cs, func(a, b engine.ChunkSpan) int {
		return cmp.Or(cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Index, b.Index))
	})
	return slices.CompactFunc(cs, func(a, b engine.ChunkSpan) bool { return a.Stage == b.Stage && a.Index == b.Index })
}

// DelayVariation is CDV: the largest rise of the chunk round trip from one
// chunk to the next (in index order), at least 0. ok is false with fewer
// than two chunks.
func DelayVariation(cs []engine.ChunkSpan) (d time.Duration, ok bool) {
	if len(cs) < 2 {
		return 0, false
	}
	for i := 1; i < len(cs); i++ {
		d = max(d, (cs[i].Read-cs[i].Written)-(cs[i-1].Read-cs[i-1].Written))
	}
	return d, true
}

// WriterSlip is write_slip: the writer's largest lateness against its
// schedule, chunk written − (writer body start + the chunk's due offset).
// The writer is the stream stage's step 0. ok is false when the spec, the
// writer's start or every chunk is missing.
func WriterSlip(t *RunTimeline, cs []engine.ChunkSpan, spec *engine.StreamSpec) (d time.Duration, ok bool) {
	if spec == nil || len(cs) == 0 {
		return 0, false
	}
	start, found := time.Duration(0), false
	for _, s := range t.Steps {
		if s.Stage == cs[0].Stage && s.Index == 0 && (!found || s.Start < start) {
			start, found = s.Start, true
		}
	}
	if !found {
		return 0, false
	}
	for _, c := range cs {
		if c.Index < spec.ChunkCount() {
			d = max(d, c.Written-(start+spec.Due(c.Index)))
		}
	}
	return d, true
}

// chunkBytes is a chunk's size: as the reader reported it, else as the
// spec makes it.
func chunkBytes(c engine.ChunkSpan, spec *engine.StreamSpec) int {
	if c.Bytes > 0 || spec == nil || c.Index >= spec.ChunkCount() {
		return c.Bytes
	}
	if n := spec.ChunkBytes(c.Index); n > 0 {
		return n // what ChunkData makes, without making it
	}
	return len(engine.ChunkData(spec, c.Index))
}

// SteadyRates are read_rate and write_rate, inverse rates in time per KiB
// over the steady window: chunks in index order without the first and last
// ⌊n/10⌋. The time from the window's first chunk to its last is divided by
// the bytes of the chunks after its first. ok is false when the window has
// fewer than two chunks or no bytes.
func SteadyRates(cs []engine.ChunkSpan, spec *engine.StreamSpec) (read, write time.Duration, ok bool) {
	trim := len(cs) / 10
	w := cs[trim : len(cs)-trim]
	if len(w) < 2 {
		return 0, 0, false
	}
	bytes := 0
	for _, c := range w[1:] {
		bytes += chunkBytes(c, spec)
	}
	if bytes == 0 {
		return 0, 0, false
	}
	perKiB := func(d time.Duration) time.Duration { return time.Duration(float64(d) * 1024 / float64(bytes)) }
	last := w[len(w)-1]
	return perKiB(last.Read - w[0].Read), perKiB(last.Written - w[0].Written), true
}
