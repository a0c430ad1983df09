package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

func TestHookStageWaitsForResumeAndDeliversOnce(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		v, _ := engine.LookupVersion("resilient-inband")
		v.Features.LazyHookResume = lazy
		h := start(t, mem.New(world.Options{}), v.Features)
		p := engine.Program{Stages: []engine.Stage{{Kind: engine.StageHook}, {Kind: engine.StageSteps, Steps: 1}}}
		ctx := context.Background()
		done := h.rec.expect("hk")
		if err := h.e.StartRun(ctx, "hk", p); err != nil {
			t.Fatal(err)
		}
		var token string
		for deadline := time.Now().Add(10 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			h.rec.mu.Lock()
			token = h.rec.hooks["hk"]
			h.rec.mu.Unlock()
		}
		if token == "" {
			t.Fatal("hook never created")
		}
		if done.Done() {
			t.Fatal("run finished before its hook was resumed")
		}
		// Resume twice with the same resume id: delivered once.
		for i := 0; i < 2; i++ {
			if err := h.e.ResumeHook(ctx, token, "resume-1", []byte("payload")); err != nil {
				t.Fatal(err)
			}
		}
		if !done.Wait(ctx, 10*time.Second) {
			t.Fatal("run did not finish after resume")
		}
		events, _ := h.w.Load(ctx, "hk")
		received := 0
		for _, ev := range events {
			if ev.Kind == world.HookReceived {
				received++
			}
		}
		if received != 1 {
			t.Errorf("lazy=%v: hook_received %d times", lazy, received)
		}
		h.checkExactlyOnce(t, "hk", p)
	}
}

func TestStreamStageDeliversEveryChunkInOrder(t *testing.T) {
	v, _ := engine.LookupVersion("runcontext")
	h := start(t, mem.New(world.Options{}), v.Features)
	p := engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
		Stream: &engine.StreamSpec{Chunks: 30, Interval: time.Millisecond}}}}
	h.run(t, "st", p)
	h.checkExactlyOnce(t, "st", p)
	h.rec.mu.Lock()
	chunks := h.rec.chunks["st"]
	h.rec.mu.Unlock()
	if len(chunks) != 30 {
		t.Fatalf("reader saw %d chunks, want 30", len(chunks))
	}
	for i, c := range chunks {
		if c.Index != i || c.Read < c.Written {
			t.Fatalf("chunk %d: %+v", i, c)
		}
	}
}
