package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// manualClock is a Runtime whose clock only moves when the test moves it
// (and by one nanosecond per reading, so readings stay ordered). Tasks and
// waits are real; only the clock is fake.
type manualClock struct {
	*world.Real
	now atomic.Int64
}

func (c *manualClock) Now() time.Duration { return time.Duration(c.now.Add(1)) }

// clockWorld is the mem world with the manual clock as its Runtime.
type clockWorld struct {
	*mem.World
	rt *manualClock
}

func (w clockWorld) Runtime() world.Runtime { return w.rt }

// TestTimestampsComeOnlyFromTheRuntime proves the engine reads time only
// through the Runtime seam: with a clock parked at 1000 hours, every
// timestamp it reports lies in the window the test advanced the clock over,
// far from any real monotonic reading.
func TestTimestampsComeOnlyFromTheRuntime(t *testing.T) {
	const base = 1000 * time.Hour
	clock := &manualClock{Real: world.NewReal()}
	clock.now.Store(int64(base))
	w := clockWorld{World: mem.New(world.Options{}), rt: clock}
	for _, v := range engine.Versions() {
		h := start(t, w, v.Features)
		for _, p := range []engine.Program{engine.FanOut(64), engine.Sequence(20)} {
			id := v.Name + "/" + string(rune('a'+len(p.Stages)%26))
			lo := time.Duration(clock.now.Load())
			h.run(t, id, p)
			hi := time.Duration(clock.now.Load())
			h.rec.mu.Lock()
			spans, end := h.rec.spans[id], h.rec.ends[id]
			h.rec.mu.Unlock()
			if len(spans) != p.StepCount() {
				t.Fatalf("%s: %d spans", id, len(spans))
			}
			for _, s := range spans {
				if s.Start < lo || s.End > hi || s.End < s.Start {
					t.Fatalf("%s: span %+v outside the runtime's window [%v, %v]", id, s, lo, hi)
				}
			}
			if end < lo || end > hi {
				t.Fatalf("%s: run finished at %v, outside [%v, %v]", id, end, lo, hi)
			}
			// Move the clock by hand between runs: the next run's stamps
			// must follow it.
			clock.now.Add(int64(time.Hour))
		}
		_ = h.e.Stop(context.Background())
	}
}
