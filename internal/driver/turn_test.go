package driver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// countingTurn lets every run start until limit measured runs have, then
// says enough; it records the calls.
type countingTurn struct {
	mu         sync.Mutex
	limit      int
	waits      []int
	done       []int
	ends       []bool
	unfinished int
}

func (c *countingTurn) Wait(ctx context.Context, warmup bool, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !warmup {
		if i >= c.limit {
			return ErrEnough
		}
		c.waits = append(c.waits, i)
	}
	return ctx.Err()
}

func (c *countingTurn) Done(warmup bool, i int, tl metrics.RunTimeline) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !warmup {
		c.done = append(c.done, i)
		if !tl.Finished {
			c.unfinished++
		}
	}
}

func (c *countingTurn) End(warmup bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ends = append(c.ends, warmup)
}

// A Turn that says enough after 3 of 10 planned runs ends the phase there:
// 3 runs, none unstarted, no timeout; every run it let start reported done
// with its finished timeline, and both phases ended.
func TestTurnEnough(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	turn := &countingTurn{limit: 3}
	res, err := Run(context.Background(), Config{World: w, Features: version(t, "resilient"),
		Program: engine.FanOut(4), RunPrefix: "t", Reps: 10, Warmup: 1, Pacer: Burst{Size: 1},
		CellTimeout: 20 * time.Second, Turn: turn})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timelines) != 3 || len(res.Unstarted) != 0 || res.TimedOut || res.Interrupted {
		t.Fatalf("timelines %d unstarted %d timed out %v interrupted %v", len(res.Timelines), len(res.Unstarted), res.TimedOut, res.Interrupted)
	}
	turn.mu.Lock()
	defer turn.mu.Unlock()
	if len(turn.waits) != 3 || len(turn.done) != 3 || turn.unfinished != 0 {
		t.Errorf("waits %v done %v unfinished %d", turn.waits, turn.done, turn.unfinished)
	}
	if len(turn.ends) != 2 || !turn.ends[0] || turn.ends[1] {
		t.Errorf("ends %v, want [true false]", turn.ends)
	}
}
