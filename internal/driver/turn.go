package driver

import (
	"context"
	"errors"

	"github.com/durabench/durabench/metrics"
)

// ErrEnough is what a Turn's Wait returns when the phase is to start no
// more runs: it has measured enough (an interleaved pair's precision was
// reached, or its budget spent). The runs not started are not the
// phase's: they are neither stalls nor unstarted.
var ErrEnough = errors.New("enough runs")

// Turn makes a cell's driver take turns with another's (an interleaved
// sweep runs two cells at once, one run in flight at a time): the pacing
// task calls Wait before it schedules each run, the run's done callback
// calls Done, and the phase calls End once it is over. A run's anchor t0
// is taken after its turn came, so waiting for the other cell is not in
// its latency.
type Turn interface {
	// Wait blocks until run i of the phase (the warm-up or the measured
	// runs) may start. It returns nil to start it, ErrEnough when the
	// phase is to start no more runs, or ctx's error (the phase's timeout,
	// or an interruption).
	Wait(ctx context.Context, warmup bool, i int) error
	// Done reports that run i of the phase finished, with its timeline.
	// It is called from the engine's task and must not block.
	Done(warmup bool, i int, tl metrics.RunTimeline)
	// End reports that the phase is over: its runs still in flight are
	// given up, and it calls Wait and Done no more.
	End(warmup bool)
}

// takeTurn waits for run i's turn (Config.Turn) until the phase's timeout
// or ctx's end; false when the run is not to start: the Turn said enough,
// the timeout came, or ctx ended.
func (ph *phaseRun) takeTurn(ctx context.Context, i int) bool {
	left := ph.timeout - (ph.d.rt.Now() - ph.epoch)
	if left <= 0 {
		return false
	}
	tctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	err := ph.d.cfg.Turn.Wait(tctx, ph.warmup, i)
	if errors.Is(err, ErrEnough) {
		ph.st.mu.Lock()
		ph.st.enough = true
		ph.st.mu.Unlock()
	}
	return err == nil
}
