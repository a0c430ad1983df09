package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/sim"
)

// blackHole never answers a Publish for the run whose id ends in suffix:
// that run can never finish.
type blackHole struct {
	world.World
	suffix string
}

func (b *blackHole) Publish(ctx context.Context, m world.Message, o world.PublishOptions) (bool, error) {
	if strings.HasSuffix(m.Run, b.suffix) {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return b.World.Publish(ctx, m, o)
}

// TestCellTimeout: a run that never finishes is recorded as a stall at the
// cell timeout, runs the driver never got to start are listed, and the cell
// does not block.
func TestCellTimeout(t *testing.T) {
	w := &blackHole{World: mem.New(world.Options{}), suffix: "-r0002"}
	defer w.Close()
	res, err := Run(context.Background(), Config{World: w, Features: version(t, "resilient-inband"),
		Program: engine.FanOut(3), RunPrefix: "to", Reps: 4, Pacer: Closed{Concurrency: 1},
		CellTimeout: 300 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Interrupted {
		t.Fatalf("timed out %v, interrupted %v", res.TimedOut, res.Interrupted)
	}
	if len(res.Timelines) != 2 || res.Timelines[1].Finished || len(res.Unstarted) != 2 {
		t.Fatalf("timelines %d (second finished %v), unstarted %v", len(res.Timelines), res.Timelines[1].Finished, res.Unstarted)
	}
	cell := res.Summarize(results.Cell{Scenario: "fanout", Version: "resilient-inband"}, metrics.Config{}, false)
	if cell.Runs != 4 || cell.Stalls != 3 {
		t.Fatalf("cell runs %d stalls %d: %+v", cell.Runs, cell.Stalls, cell.StalledRuns)
	}
	if cell.StalledRuns[0].Run != "to-r0002" || cell.StalledRuns[0].Finished {
		t.Errorf("stalled runs %+v", cell.StalledRuns)
	}
}

// TestInterrupt: cancelling the context stops starting runs; the cell is
// reported interrupted, not as a result.
func TestInterrupt(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	p := engine.FanOut(2)
	p.Body.Fixed = 20 * time.Millisecond
	time.AfterFunc(100*time.Millisecond, cancel)
	res, err := Run(ctx, Config{World: w, Features: version(t, "baseline"), Program: p, RunPrefix: "int",
		Reps: 100, Pacer: Closed{Concurrency: 1}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || len(res.Unstarted) == 0 {
		t.Fatalf("interrupted %v, unstarted %d", res.Interrupted, len(res.Unstarted))
	}
	for _, tl := range res.Timelines {
		if !tl.Finished {
			t.Errorf("run %s in flight at the interrupt did not finish within the grace", tl.ID)
		}
	}
}

// TestVirtualTime: the driver waits only through the world's Runtime, so on
// the sim world an open-loop cell of 2 s of arrivals runs in virtual time,
// with runs anchored exactly on their schedule.
func TestVirtualTime(t *testing.T) {
	w := sim.New(sim.Config{Seed: 3})
	defer w.Close()
	var res *Result
	var err error
	wall := time.Now()
	if rerr := w.Run(context.Background(), func(ctx context.Context) {
		res, err = Run(ctx, Config{World: w, Features: version(t, "runcontext"), Program: engine.FanOut(8),
			RunPrefix: "vt", Reps: 40, Warmup: 2, Pacer: OpenRate{Rate: 20}})
	}); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timelines) != 40 || res.TimedOut {
		t.Fatalf("%d timelines, timed out %v", len(res.Timelines), res.TimedOut)
	}
	t0 := res.Timelines[0].T0
	for i, tl := range res.Timelines {
		if want := t0 + time.Duration(i)*50*time.Millisecond; tl.T0 != want || !tl.Finished {
			t.Errorf("run %d: t0 %v want %v, finished %v", i, tl.T0, want, tl.Finished)
		}
		if res.Lag[i] != 0 {
			t.Errorf("run %d: lag %v in virtual time", i, res.Lag[i])
		}
	}
	if res.Elapsed < 1950*time.Millisecond {
		t.Errorf("virtual elapsed %v, want about 2 s", res.Elapsed)
	}
	t.Logf("2 s of virtual arrivals in %v of wall time", time.Since(wall))
}
