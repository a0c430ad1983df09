package driver

import (
	"fmt"
	"time"
)

// Pacer decides when each run of a cell starts, after vegeta's Pacer. The
// driver asks it before starting run number started (0-based), with the time
// elapsed since the phase's epoch and the number of runs still in flight.
// It answers the run's scheduled start relative to the epoch (the driver
// sleeps until then; a time already past starts the run at once but keeps
// the schedule as its anchor t0), or block when the run must wait until a
// run in flight finishes.
type Pacer interface {
	Pace(elapsed time.Duration, started, inflight int) (at time.Duration, block bool)
	// Open reports whether latency is anchored on a fixed schedule that does
	// not depend on completions (open loop): only then is driver lag, actual
	// minus scheduled start, a meaningful figure.
	Open() bool
	// String describes the pacing as results record it ("burst(1)").
	String() string
}

// Burst starts Size runs at once, waits until all of them finished, and
// starts the next Size. Size <= 0 starts every run at once.
type Burst struct{ Size int }

// Pace implements Pacer.
func (b Burst) Pace(elapsed time.Duration, started, inflight int) (time.Duration, bool) {
	if b.Size > 0 && started > 0 && started%b.Size == 0 && inflight > 0 {
		return 0, true
	}
	return elapsed, false
}

// Open implements Pacer.
func (Burst) Open() bool { return false }

func (b Burst) String() string {
	if b.Size <= 0 {
		return "burst(all)"
	}
	return fmt.Sprintf("burst(%d)", b.Size)
}

// Closed keeps Concurrency runs in flight: a run starts when one finishes.
// Latency is measured from the actual start, so a stalled system slows the
// driver down and hides its own backlog — use Open to see it.
type Closed struct{ Concurrency int }

// Pace implements Pacer.
func (c Closed) Pace(elapsed time.Duration, started, inflight int) (time.Duration, bool) {
	if inflight >= max(c.Concurrency, 1) {
		return 0, true
	}
	return elapsed, false
}

// Open implements Pacer.
func (Closed) Open() bool { return false }

func (c Closed) String() string { return fmt.Sprintf("closed(%d)", max(c.Concurrency, 1)) }

// OpenRate starts runs at a fixed rate, Rate runs per second, whatever
// happens to the runs already started: run i is scheduled at i/Rate, and its
// latency is measured from that schedule, not from when the driver got round
// to it (wrk2's answer to coordinated omission).
type OpenRate struct{ Rate float64 }

// Pace implements Pacer.
func (o OpenRate) Pace(elapsed time.Duration, started, inflight int) (time.Duration, bool) {
	return time.Duration(float64(started) * float64(time.Second) / o.Rate), false
}

// Open implements Pacer.
func (OpenRate) Open() bool { return true }

func (o OpenRate) String() string { return fmt.Sprintf("open(%g/s)", o.Rate) }

// NewPacer returns the pacer named pace ("burst", "closed", "open").
// concurrency sizes burst and closed; rate (runs per second) drives open.
func NewPacer(pace string, concurrency int, rate float64) (Pacer, error) {
	switch pace {
	case "burst", "":
		return Burst{Size: concurrency}, nil
	case "closed":
		if concurrency < 1 {
			return nil, fmt.Errorf("closed pacing needs concurrency >= 1, got %d", concurrency)
		}
		return Closed{Concurrency: concurrency}, nil
	case "open":
		if !(rate > 0) {
			return nil, fmt.Errorf("open pacing needs a rate > 0 runs/s, got %g", rate)
		}
		return OpenRate{Rate: rate}, nil
	}
	return nil, fmt.Errorf("pace %q is not burst, closed or open", pace)
}
