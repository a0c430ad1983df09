package metrics

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
)

// ErrDuplicateRun is returned by Begin for a run id that is already
// registered.
var ErrDuplicateRun = errors.New("metrics: run already registered")

// shardCount spreads runs over independent locks so that concurrent step
// consumers reporting different runs rarely meet on one mutex.
const shardCount = 64

// Recorder is an engine.Observer that keeps one RunTimeline per registered
// run. Callbacks for runs that were never registered (warm-up runs of
// another driver, runs already forgotten) are ignored.
//
// It is safe for concurrent use. The hot path (StepBody) takes a shard read
// lock and the run's own mutex and appends into a slice preallocated by
// Begin: no allocation in steady state.
type Recorder struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu   sync.RWMutex
	runs map[string]*runRecord
	// pad keeps neighbouring shards' locks off one cache line.
	_ [40]byte
}

type runRecord struct {
	mu   sync.Mutex
	tl   RunTimeline
	done func()
	// spanCap is about how many spans the run will have: it sizes what
	// keeps them the first time they are reported.
	spanCap int
	// batches are the engine's reports of spans not packed yet (tl's
	// engineSpans): kept as the engine handed them over, and packed when
	// the timeline is read (pack), off the run's path.
	batches [][]engine.Span
}

// pack moves the engine's span reports into the timeline, packed; rec.mu
// is held.
func (rec *runRecord) pack() {
	for i, b := range rec.batches {
		rec.tl.engineSpans.addEngine(b, rec.spanCap/spanChunk+1)
		rec.batches[i] = nil
	}
	rec.batches = rec.batches[:0]
}

// spansPerStep is about how many spans the built-in engine reports per
// step (a 256-branch fan-out: ~9.1).
const spansPerStep = 10

var _ engine.SpanObserver = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].runs = make(map[string]*runRecord)
	}
	return r
}

func (r *Recorder) shard(run string) *shard {
	return &r.shards[maphash.String(r.seed, run)%shardCount]
}

func (r *Recorder) lookup(run string) *runRecord {
	s := r.shard(run)
	s.mu.RLock()
	rec := s.runs[run]
	s.mu.RUnlock()
	return rec
}

// Begin registers run before it starts. t0 is its scheduled start on the
// runtime clock; expectedSteps sizes the step slice so that StepBody does
// not allocate (redeliveries beyond it still append).
//
// done, when non-nil, is called exactly once when the run finishes
// (RunFinished or Fail), after the timeline is updated and outside every
// Recorder lock — typically a world.Future's Resolve, so the driver waits for
// completion on its runtime without polling. It runs on the engine's task
// and must not block.
func (r *Recorder) Begin(run string, t0 time.Duration, expectedSteps int, done func()) error {
	rec := &runRecord{
		tl:      RunTimeline{ID: run, T0: t0, Steps: make([]engine.StepSpan, 0, max(expectedSteps, 0))},
		done:    done,
		spanCap: max(expectedSteps, 0)*spansPerStep + 16,
	}
	s := r.shard(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runs[run]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateRun, run)
	}
	s.runs[run] = rec
	return nil
}

// StepBody records one execution of a step body.
func (r *Recorder) StepBody(run string, sp engine.StepSpan) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.tl.Steps = append(rec.tl.Steps, sp)
	rec.mu.Unlock()
}

// Spans records a task's spans (engine.SpanObserver): where the run's time
// went. It keeps the engine's slice as it is; the spans are packed (in
// chunks, spanstore.go) when the timeline is read, so that what a report
// costs the engine's task is an append to a list.
func (r *Recorder) Spans(run string, spans []engine.Span) {
	rec := r.lookup(run)
	if rec == nil || len(spans) == 0 {
		return
	}
	rec.mu.Lock()
	if rec.batches == nil {
		// About two reports per step (its task and the orchestrator's).
		rec.batches = make([][]engine.Span, 0, rec.spanCap/(spansPerStep/2)+8)
	}
	rec.batches = append(rec.batches, spans)
	rec.mu.Unlock()
}

// SpanSink receives spans already in the critical path's terms — each
// with its category — rather than as the built-in engine reports them: a
// target's span events, converted to the driver's clock (package target's
// Session). Recorder implements it, and so does the driver's observer.
type SpanSink interface {
	// AddSpans records spans of run. The slice is reused after the call
	// returns: copy what is kept.
	AddSpans(run string, spans []Span)
}

var _ SpanSink = (*Recorder)(nil)

// TargetSpanIDs is where a target's span ids live in a run's id space: a
// target's id n (≥ 1) is n | TargetSpanIDs (TargetSpanID), apart from the
// built-in engine's ids (blocks counted from 1 << 20, far below; an
// external worker's above 1 << 52, below 1 << 63) and from the driver's
// own driver_lag span (which nothing refers to: ID 0).
const TargetSpanIDs uint64 = 1 << 63

// TargetSpanID maps a target's span id into the run's id space; 0 (and any
// id below 1, which names no span) stays 0: no span.
func TargetSpanID(id int64) uint64 {
	if id <= 0 {
		return 0
	}
	return uint64(id) | TargetSpanIDs
}

// AddSpans records spans of run that already carry their categories
// (SpanSink): a target's.
func (r *Recorder) AddSpans(run string, spans []Span) {
	rec := r.lookup(run)
	if rec == nil || len(spans) == 0 {
		return
	}
	rec.mu.Lock()
	if rec.spanCap > 0 && cap(rec.tl.Spans)-len(rec.tl.Spans) < len(spans) {
		rec.tl.Spans = append(make([]Span, 0, max(rec.spanCap, len(rec.tl.Spans)+len(spans))), rec.tl.Spans...)
		rec.spanCap = 0
	}
	rec.tl.Spans = append(rec.tl.Spans, spans...)
	rec.mu.Unlock()
}

// Started records that the driver started run at at (its actual start):
// the run's driver lag, from its scheduled start, is the first part of
// its critical path. A later call moves the start (a start that waited in
// a target session's queue left the driver when it was sent).
func (r *Recorder) Started(run string, at time.Duration) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range rec.tl.Spans {
		if rec.tl.Spans[i].Category == CatDriverLag {
			// A snapshot may share the slice: change a copy.
			rec.tl.Spans = slices.Clone(rec.tl.Spans)
			rec.tl.Spans[i].End = max(at, rec.tl.Spans[i].Start)
			return
		}
	}
	rec.tl.Spans = append(rec.tl.Spans, Span{Category: CatDriverLag, Name: "driver", Start: rec.tl.T0,
		End: max(at, rec.tl.T0), Stage: -1, Index: -1})
}

// HookCreated records that run's hook token was registered at at.
func (r *Recorder) HookCreated(run, token string, at time.Duration) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.tl.Hooks = append(rec.tl.Hooks, HookSpan{Token: token, Created: at})
	rec.mu.Unlock()
}

// HookResumed records that the driver resumed run's hook token at at. It is
// called by the driver, not the engine (the engine does not know when the
// resume was issued). A token not seen by HookCreated is added.
func (r *Recorder) HookResumed(run, token string, at time.Duration) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range rec.tl.Hooks {
		if h := &rec.tl.Hooks[i]; h.Token == token && !h.WasResumed {
			h.Resumed, h.WasResumed = at, true
			return
		}
	}
	rec.tl.Hooks = append(rec.tl.Hooks, HookSpan{Token: token, Resumed: at, WasResumed: true})
}

// StreamChunk records one chunk read by a stream reader.
func (r *Recorder) StreamChunk(run string, c engine.ChunkSpan) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.tl.Chunks = append(rec.tl.Chunks, c)
	rec.mu.Unlock()
}

// RunFinished records the run's terminal event. Only the first report
// counts; it calls the run's done function.
func (r *Recorder) RunFinished(run string, at time.Duration, failed bool) {
	r.finish(run, at, failed, "")
}

// Fail marks run as failed at at with err (e.g. the driver could not start
// it) and calls its done function, unless the run already finished.
func (r *Recorder) Fail(run string, at time.Duration, err error) {
	msg := "failed"
	if err != nil {
		msg = err.Error()
	}
	r.finish(run, at, true, msg)
}

func (r *Recorder) finish(run string, at time.Duration, failed bool, msg string) {
	rec := r.lookup(run)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	if rec.tl.Finished {
		rec.mu.Unlock()
		return
	}
	rec.tl.Finished, rec.tl.Done, rec.tl.Failed = true, at, failed
	if failed && rec.tl.Error == "" {
		rec.tl.Error = msg
		if msg == "" {
			rec.tl.Error = "run failed"
		}
	}
	done := rec.done
	rec.mu.Unlock()
	if done != nil {
		done()
	}
}

// Snapshot returns a copy of run's timeline. now is the current runtime
// time: a run that has not finished gets Cut = now, so its TTLS and TTC are
// the time elapsed so far (the driver snapshots unfinished runs at the cell
// timeout). ok is false for a run that was never registered.
func (r *Recorder) Snapshot(run string, now time.Duration) (tl RunTimeline, ok bool) {
	rec := r.lookup(run)
	if rec == nil {
		return RunTimeline{}, false
	}
	rec.mu.Lock()
	rec.pack()
	tl = rec.tl.clone()
	rec.mu.Unlock()
	if !tl.Finished {
		tl.Cut = now
	}
	return tl, true
}

// Forget drops run; later callbacks for it are ignored.
func (r *Recorder) Forget(run string) {
	s := r.shard(run)
	s.mu.Lock()
	delete(s.runs, run)
	s.mu.Unlock()
}

// Len returns the number of registered runs.
func (r *Recorder) Len() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		n += len(s.runs)
		s.mu.RUnlock()
	}
	return n
}
