package cluster

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

func TestBatchRoundTrip(t *testing.T) {
	step := engine.StepSpan{Stage: 2, Index: 63, Seq: 65, Start: 1500 * time.Microsecond, End: -3 * time.Millisecond, Inline: true, Attempt: 3}
	chunk := engine.ChunkSpan{Stage: 1, Index: 7, Written: time.Second, Read: time.Second + 40*time.Millisecond}
	b := appendBatchHeader(nil, "w-1", 7, 42*time.Millisecond)
	b = appendStep(b, "run-a", step)
	b = appendHook(b, "run-b", "tok", 7*time.Millisecond)
	b = appendChunk(b, "run-c", chunk)
	b = appendFinished(b, "run-a", 9*time.Millisecond, true)
	spans := []engine.Span{
		{Kind: engine.SpanCall, Op: engine.OpOf(world.OpLoad), Start: time.Millisecond, End: 2 * time.Millisecond, Wait: 300 * time.Microsecond, Stage: -1, Index: -1, ID: 1<<20 + 1, Parent: 1 << 20},
		{Kind: engine.SpanTask, Start: 0, End: 3 * time.Millisecond, Stage: 0, Index: 5, ID: 1 << 20, After: 7},
	}
	b = appendSpans(b, "run-a", spans)
	id, seq, wm, recs, err := decodeBatch(b)
	if err != nil || id != "w-1" || seq != 7 || wm != 42*time.Millisecond || len(recs) != 5 {
		t.Fatalf("decode: %q %v %d records, %v", id, wm, len(recs), err)
	}
	if r := recs[0]; r.kind != recStep || r.run != "run-a" || r.step != step {
		t.Errorf("step record %+v", r)
	}
	if r := recs[1]; r.kind != recHook || r.run != "run-b" || r.token != "tok" || r.at != 7*time.Millisecond {
		t.Errorf("hook record %+v", r)
	}
	if r := recs[2]; r.kind != recChunk || r.run != "run-c" || r.chunk != chunk {
		t.Errorf("chunk record %+v", r)
	}
	if r := recs[3]; r.kind != recFinished || r.run != "run-a" || r.at != 9*time.Millisecond || !r.failed {
		t.Errorf("finished record %+v", r)
	}
	if r := recs[4]; r.kind != recSpans || r.run != "run-a" || !slices.Equal(r.spans, spans) {
		t.Errorf("spans record %+v", r)
	}
	// An empty batch is a heartbeat.
	if _, seq, wm, recs, err := decodeBatch(appendBatchHeader(nil, "w", 1, time.Second)); err != nil || seq != 1 || wm != time.Second || len(recs) != 0 {
		t.Errorf("heartbeat: %v %d %v", wm, len(recs), err)
	}
	// Every truncation of a batch is an error, never a panic.
	for n := 1; n < len(b); n++ {
		if _, _, _, recs, err := decodeBatch(b[:n]); err == nil && len(recs) == 5 {
			t.Errorf("truncated to %d bytes: decoded all records", n)
		}
	}
	if _, _, _, _, err := decodeBatch([]byte{9}); !errors.Is(err, errBatch) {
		t.Errorf("unknown version: %v", err)
	}
}

// TestRelease: a run's end is passed on only when every other live worker's
// watermark is past it (allowing for the clocks' error), or that worker is
// gone.
func TestRelease(t *testing.T) {
	c := &Session{workers: map[string]*workerState{
		"a": {clock: Clock{RTT: 200 * time.Microsecond}, hasWM: true, wm: 10 * time.Millisecond},
		"b": {clock: Clock{RTT: 200 * time.Microsecond}, hasWM: true, wm: 10 * time.Millisecond},
	}}
	f := finished{run: "r", at: 10 * time.Millisecond, from: "a"}
	if c.covered(f) {
		t.Error("released while b's watermark is within the clock error")
	}
	c.workers["b"].wm = 10*time.Millisecond + 201*time.Microsecond
	if !c.covered(f) {
		t.Error("not released with b's watermark past it")
	}
	c.workers["b"].wm = 0
	c.workers["b"].silent = true
	if !c.covered(f) {
		t.Error("not released with b gone")
	}
}

func TestSanitizeID(t *testing.T) {
	for in, want := range map[string]string{"host-1": "host-1", "a.b c>*": "a_b_c__", "Wörker_2": "W_rker_2"} {
		if got := SanitizeID(in); got != want {
			t.Errorf("SanitizeID(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkWorkerStepBody is the cost a worker's engine pays per step body
// to record it (encode into the batch buffer under its lock); publishing is
// the flusher's, off the hot path.
func BenchmarkWorkerStepBody(b *testing.B) {
	var steps atomic.Int64
	bt := &batcher{full: make(chan struct{}, 1)}
	o := &recordingObserver{b: bt, steps: &steps}
	s := engine.StepSpan{Stage: 0, Index: 17, Seq: 17, Start: 12 * time.Millisecond, End: 13 * time.Millisecond, Attempt: 1}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o.StepBody("3f9a1c2b7e-r0001", s)
		if i%1024 == 1023 { // a flush takes the buffer
			bt.mu.Lock()
			bt.buf, bt.n = bt.buf[:0], 0
			bt.mu.Unlock()
		}
	}
}

// TestLostBatchesAreCounted: record batches are numbered 1, 2, 3, … and a
// heartbeat repeats the last number, so a batch lost between a worker and
// the driver — even the last one, followed only by heartbeats or by the
// worker's final count — shows as a gap and reaches the cell's incidents.
func TestLostBatchesAreCounted(t *testing.T) {
	ws := &workerState{}
	ws.see(0, false) // a heartbeat before any record
	ws.see(1, true)
	ws.see(1, false)
	ws.see(2, true)
	if ws.lost != 0 {
		t.Fatalf("no batch lost, counted %d", ws.lost)
	}
	ws.see(4, true)  // 3 lost
	ws.see(6, false) // 5 and 6 lost, only a heartbeat says so
	if ws.lost != 3 || ws.batches != 6 {
		t.Fatalf("lost %d (want 3), last %d (want 6)", ws.lost, ws.batches)
	}
	rep := Report{Workers: []WorkerReport{
		{ID: "w1", LostBatches: ws.lost, Stats: WorkerStats{Unsent: 2}},
		{ID: "w2"},
	}}
	inc := rep.Incidents()
	if inc.Dropped != 5 || !strings.Contains(inc.Last, "w1") {
		t.Fatalf("incidents %+v: want 5 dropped (3 batches, 2 unsent records) naming w1", inc)
	}
	if (Report{Workers: []WorkerReport{{ID: "w"}}}).Incidents().Total() != 0 {
		t.Fatal("a clean report has incidents")
	}
}

// stepCounter counts the step bodies fed to it.
type stepCounter struct {
	engine.Observer
	steps atomic.Int64
}

func (s *stepCounter) StepBody(string, engine.StepSpan) { s.steps.Add(1) }

// TestBatchesAfterDetachAreCountedNotFed: once the driver detached from a
// cell (its runs are over), a worker's batches — the last ones, published
// as it stops at End — are no longer fed to the cell's observer, but they
// are still seen: a worker's count of batches then matches the driver's,
// and nothing reads as lost. (Unsubscribed at detach, the driver counted
// them as dropped: a cell with late records, such as a redelivered step's
// after its run ended, failed with world incidents.)
func TestBatchesAfterDetachAreCountedNotFed(t *testing.T) {
	obs := &stepCounter{}
	c := &Session{d: &Coordinator{cfg: CoordinatorConfig{Silence: DefaultSilence}}, rt: world.NewReal(), obs: obs,
		workers: map[string]*workerState{"w1": {}}}
	batch := func(seq uint64) *nats.Msg {
		b := appendBatchHeader(nil, "w1", seq, time.Millisecond)
		return &nats.Msg{Data: appendStep(b, "r", engine.StepSpan{Start: 1, End: 2, Attempt: 1})}
	}
	c.onBatch(batch(1))
	c.stopFeeding()
	c.onBatch(batch(2))
	ws := c.workers["w1"]
	if got := obs.steps.Load(); got != 1 {
		t.Errorf("%d step bodies fed, want 1: the batch after detach was fed", got)
	}
	if ws.batches != 2 || ws.lost != 0 {
		t.Errorf("batches seen %d, lost %d; want 2 seen, none lost", ws.batches, ws.lost)
	}
}
