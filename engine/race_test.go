package engine_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// raceThenStep is a race of n steps followed by one step: the run's
// continuation after the race.
func raceThenStep(n int) engine.Program {
	p := engine.Race(n)
	p.Stages = append(p.Stages, engine.Stage{Kind: engine.StageSteps, Steps: 1})
	return p
}

func TestRaceContinuesOnTheFirstAndEndsAfterTheLast(t *testing.T) {
	h := start(t, mem.New(world.Options{}), version(t, "pending-count"))
	p := raceThenStep(20)
	p.Body.Jitter = 200 * time.Millisecond
	h.run(t, "race", p)
	h.checkExactlyOnce(t, "race", p)
	h.rec.mu.Lock()
	spans, end := h.rec.spans["race"], h.rec.ends["race"]
	h.rec.mu.Unlock()
	var firstEnd, lastEnd, next time.Duration
	for _, s := range spans {
		switch {
		case s.Stage == 1:
			next = s.Start
		case firstEnd == 0 || s.End < firstEnd:
			firstEnd = s.End
		}
		if s.Stage == 0 {
			lastEnd = max(lastEnd, s.End)
		}
	}
	if next < firstEnd || next >= lastEnd {
		t.Errorf("the step after the race started at %v: want after the first branch ended (%v) and before the last did (%v)",
			next, firstEnd, lastEnd)
	}
	if end < lastEnd {
		t.Errorf("run ended at %v, before its last branch (%v)", end, lastEnd)
	}
}

// slowFirstClaim holds the first claim (step_started) of one step.
type slowFirstClaim struct {
	world.World
	entity string
	hold   time.Duration
	seen   atomic.Bool
}

func (w *slowFirstClaim) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	if ev.Kind == world.StepStarted && ev.Entity == w.entity && w.seen.CompareAndSwap(false, true) {
		time.Sleep(w.hold)
	}
	return w.World.Append(ctx, run, ev, pre)
}

// A race's continuation runs before the dispatching invocation has started
// its inline step: the step after the race completes, and the replay that
// follows looks for losers a dead dispatch left behind. The inline step is
// created and unfinished, with no message — but it is not left behind: it
// runs in this engine, once.
func TestRaceContinuationLeavesAnInlineStepToItsRunner(t *testing.T) {
	for _, sw := range []string{"none", "resilient-step-dispatch=0"} {
		t.Run(sw, func(t *testing.T) {
			set, err := engine.ParseSwitchSet(sw)
			if err != nil {
				t.Fatal(err)
			}
			w := &slowFirstClaim{World: mem.New(world.Options{}), entity: "0.0", hold: 50 * time.Millisecond}
			h := start(t, w, set.Apply(version(t, "resilient")))
			p := raceThenStep(5)
			h.run(t, "race", p)
			h.checkExactlyOnce(t, "race", p)
			h.rec.mu.Lock()
			defer h.rec.mu.Unlock()
			for _, s := range h.rec.spans["race"] {
				if s.Stage == 0 && s.Index == 0 && s.Start < 50*time.Millisecond {
					t.Errorf("step 0.0 ran at %v from a republished message, while the invocation running it inline was still claiming it", s.Start)
				}
			}
		})
	}
}

func TestPayloadIsStoredWithEveryStep(t *testing.T) {
	h := start(t, mem.New(world.Options{}), version(t, "runcontext"))
	p := engine.FanOut(3)
	p.Payload = 10 << 10
	h.run(t, "pl", p)
	events, err := h.w.Load(context.Background(), "pl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Kind == world.StepCreated || ev.Kind == world.StepCompleted {
			n++
			if len(ev.Data) != 10<<10 || bytes.Count(ev.Data, []byte{0}) > 0 {
				t.Fatalf("%s %s carries %d bytes, want 10240 non-zero bytes", ev.Kind, ev.Entity, len(ev.Data))
			}
		}
	}
	if n != 6 {
		t.Errorf("%d step_created/step_completed events, want 6", n)
	}
}

// TestStreamFollowsItsCadenceAndSizes: a cadence's offsets (at a speed) and
// sizes, rotated sizes, and a pipeline whose transform step upper-cases
// every chunk into a second stream, read end to end.
func TestStreamFollowsItsCadenceAndSizes(t *testing.T) {
	h := start(t, mem.New(world.Options{}), version(t, "runcontext"))
	cad := []engine.CadenceChunk{{Offset: 0, Bytes: 5}, {Offset: 40 * time.Millisecond, Bytes: 300},
		{Offset: 40 * time.Millisecond, Bytes: 1}, {Offset: 120 * time.Millisecond, Bytes: 64}}
	p := engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
		Stream: &engine.StreamSpec{Cadence: cad, Speed: 2}}}}
	h.run(t, "cad", p)
	h.rec.mu.Lock()
	chunks := h.rec.chunks["cad"]
	h.rec.mu.Unlock()
	if len(chunks) != len(cad) {
		t.Fatalf("reader saw %d chunks, want %d", len(chunks), len(cad))
	}
	for i, c := range chunks {
		if c.Bytes != cad[i].Bytes {
			t.Errorf("chunk %d: %d bytes, want %d", i, c.Bytes, cad[i].Bytes)
		}
	}
	// At speed 2 the last chunk is due 60 ms after the first.
	if gap := chunks[3].Written - chunks[0].Written; gap < 60*time.Millisecond || gap > 500*time.Millisecond {
		t.Errorf("last chunk written %v after the first, want 60 ms (offset 120 ms at speed 2)", gap)
	}
	pipe := engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
		Stream: &engine.StreamSpec{Chunks: 25, Sizes: []int{3000}, Transform: true}}}}
	h.run(t, "pipe", pipe)
	h.checkExactlyOnce(t, "pipe", pipe)
	h.rec.mu.Lock()
	chunks = h.rec.chunks["pipe"]
	h.rec.mu.Unlock()
	if len(chunks) != 25 {
		t.Fatalf("the pipeline's reader saw %d chunks, want 25", len(chunks))
	}
	out, closed, err := h.w.ReadChunks(context.Background(), "pipe/s0t", 0, 0)
	if err != nil || !closed || len(out) != 25 || !bytes.Equal(out[3].Data, bytes.ToUpper(engine.ChunkData(pipe.Stages[0].Stream, 3))) {
		t.Fatalf("transformed stream: %d chunks, closed %v, err %v; want 25 upper-cased chunks, closed", len(out), closed, err)
	}
	for i, c := range chunks {
		if c.Index != i || c.Bytes != 3000 || c.Written != out[i].WrittenAt {
			t.Fatalf("pipeline chunk %d: %+v, want 3000 bytes written by the writer at %v", i, c, out[i].WrittenAt)
		}
	}
	sizes := engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
		Stream: &engine.StreamSpec{Chunks: 7, Sizes: []int{10, 1000, 100}}}}}
	h.run(t, "sizes", sizes)
	h.rec.mu.Lock()
	chunks = h.rec.chunks["sizes"]
	h.rec.mu.Unlock()
	for i, c := range chunks {
		if want := []int{10, 1000, 100}[i%3]; c.Bytes != want {
			t.Errorf("sized chunk %d: %d bytes, want %d", i, c.Bytes, want)
		}
	}
}
