package driver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
)

// Open pacing charges every microsecond a run starts late to the engine
// (latency is anchored on the schedule), so the driver waits for a run's
// scheduled start more precisely than the machine sleeps, in three parts:
//
//   - A coarse sleep until a spin window before the schedule. Go's timers
//     park an idle processor in epoll_wait, whose timeout has millisecond
//     resolution, so time.Sleep of anything under 1 ms returns after about
//     1 ms; on Linux the coarse sleep is a timerfd read (openTimer), tens
//     of µs late.
//   - A spin, without yielding, until the run's hand-off time. The window
//     is the coarse sleep's p99 overshoot with a margin (measured once per
//     process by Calibrate, then over the pacer's own recent sleeps), at
//     most the gap between two runs (a quarter of it when the engine runs
//     in another process): when the machine cannot sleep that precisely
//     the pacer spins from one run to the next.
//   - The hand-off to a starter goroutine a lead before the schedule: what
//     it costs to wake a goroutine (a futex on another processor, tens of
//     µs on a virtual machine) is paid before the run's time, not after;
//     the starter resumes the pacer, spins the rest of the lead and calls
//     StartRun on the schedule. The lead follows the measured hand-offs.
//
// The pacer never calls runtime.Gosched: a yielding goroutine goes to the
// runtime's global run queue, which a busy processor reads once every 61
// scheduling rounds; at 5,000 runs/s on mem that left the pacer runnable
// for up to 2.8 ms at a time (lag p99 0.4-1.7 ms; without it 30-215 µs).
// It yields its processor only by blocking: in the coarse sleep, or
// waiting for the starter it just woke to resume it, which puts it next in
// line on the starter's processor.

// Calibration is how precisely this machine sleeps, measured once per
// process by Calibrate, and the spin window the driver derives from it.
// Results files record it (results.Host.Pacer).
type Calibration struct {
	// Sleep names the coarse sleep the driver uses: "timerfd" (Linux) or
	// "time.Sleep".
	Sleep string
	// OvershootP50, OvershootP90 and OvershootP99 are how late the coarse
	// sleep returned over calibrationSamples sleeps of calibrationSleep.
	OvershootP50, OvershootP90, OvershootP99 time.Duration
	// SleepOvershootP50 is time.Sleep's median overshoot (the figure that
	// made precise pacing necessary), measured whichever sleep is used.
	SleepOvershootP50 time.Duration
	// SpinWindow is how long before a run's hand-off the coarse sleep ends
	// and spinning begins, for a cell's first waits: OvershootP99 with a
	// margin, within [minSpinWindow, maxSpinWindow]. Later waits follow
	// the cell's own sleeps.
	SpinWindow time.Duration
}

const (
	calibrationSamples = 64
	calibrationSleep   = 100 * time.Microsecond
	minSpinWindow      = 20 * time.Microsecond
	// maxSpinWindow bounds the CPU a wait may spin: on a machine whose
	// sleeps overshoot more (an overloaded one) lag is the machine's.
	maxSpinWindow = 2 * time.Millisecond
	// coarseStretch is how much of a long wait is left to the coarse
	// sleep after the runtime's: more than the runtime's overshoot.
	coarseStretch = 3 * time.Millisecond
	// The hand-off lead starts at initialLead and follows the p99 of
	// recent hand-offs with a quarter's margin, within [minLead, maxLead]
	// and at most half the gap between two runs.
	initialLead = 50 * time.Microsecond
	minLead     = 10 * time.Microsecond
	maxLead     = 500 * time.Microsecond
	// outsideSpinShare bounds the spin to a quarter of the gap between two
	// runs when the engine runs in another process (newWaiter).
	outsideSpinShare = 4
)

var calibration = sync.OnceValue(measureCalibration)

// Calibrate returns this process's sleep calibration, measuring it on the
// first call (about 20 ms: calibrationSamples sleeps of each kind).
func Calibrate() Calibration { return calibration() }

func measureCalibration() Calibration {
	std := overshoots(time.Sleep, calibrationSleep, calibrationSamples)
	c := Calibration{Sleep: "time.Sleep", SleepOvershootP50: quantile(std, 0.5)}
	v := std
	if sleep, release, ok := openTimer(); ok {
		c.Sleep, v = "timerfd", overshoots(sleep, calibrationSleep, calibrationSamples)
		release()
	}
	c.OvershootP50, c.OvershootP90, c.OvershootP99 = quantile(v, 0.5), quantile(v, 0.9), quantile(v, 0.99)
	c.SpinWindow = spinWindow(c.OvershootP99)
	return c
}

// overshoots sleeps d n times with sleep and returns how late each sleep
// woke, sorted.
func overshoots(sleep func(time.Duration), d time.Duration, n int) []time.Duration {
	v := make([]time.Duration, n)
	for i := range v {
		t := time.Now()
		sleep(d)
		v[i] = max(time.Since(t)-d, 0)
	}
	slices.Sort(v)
	return v
}

// coarseSleep is a precise waiter's coarse sleep: the timerfd where it
// can be opened and polled (openTimer), else time.Sleep.
func coarseSleep() (sleep func(time.Duration), release func()) {
	if sleep, release, ok := openTimer(); ok {
		return sleep, release
	}
	return time.Sleep, func() {}
}

// spinWindow is the window that covers a coarse sleep overshooting p99.
func spinWindow(p99 time.Duration) time.Duration {
	return withMargin(p99, minSpinWindow, maxSpinWindow)
}

// withMargin is p99 with a quarter's margin, within [lo, hi]: how the
// spin window and the hand-off lead follow what they cover.
func withMargin(p99, lo, hi time.Duration) time.Duration { return min(max(p99+p99/4, lo), hi) }

// Record is c as a results file records it.
func (c Calibration) Record() *results.PacerCalibration {
	return &results.PacerCalibration{Sleep: c.Sleep, OvershootP50US: us(c.OvershootP50), OvershootP90US: us(c.OvershootP90),
		OvershootP99US: us(c.OvershootP99), GoSleepOvershootP50US: us(c.SleepOvershootP50), SpinWindowUS: us(c.SpinWindow)}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// quantile is the nearest-rank q-quantile of sorted v.
func quantile(v []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(v))+0.5) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// ring holds the last len(v) samples of a duration.
type ring struct {
	v [128]time.Duration
	n int
}

// add records d; it reports the p99 of the last len(v) samples every
// len(v)/8 samples once the ring is full (ok), and nothing otherwise.
func (r *ring) add(d time.Duration) (p99 time.Duration, ok bool) {
	r.v[r.n%len(r.v)] = d
	r.n++
	if r.n < len(r.v) || r.n%(len(r.v)/8) != 0 {
		return 0, false
	}
	sorted := r.v
	slices.Sort(sorted[:])
	return quantile(sorted[:], 0.99), true
}

// waiter waits until a scheduled time on the runtime's clock: precisely
// (coarse sleep, then spin) in real time, with the runtime's own Sleep in
// virtual time or when precision is off. One pacing task owns it (it is
// not safe for concurrent use); release frees its timer.
type waiter struct {
	rt      world.Runtime
	window  time.Duration
	sleep   func(time.Duration) // the coarse sleep; nil: not precise
	release func()
	// over holds the coarse sleeps' recent overshoots: the window follows
	// their p99. A sleep overshoots more the longer it is
	// (BenchmarkSleepOvershoot), so the calibration's short sleeps set the
	// window of the first waits only.
	over ring
	// lead is how long before its schedule a run is handed to its starter;
	// handoffs holds how long recent hand-offs took.
	lead     time.Duration
	handoffs ring
	// spinShare: a wait spins at most 1/spinShare of the gap between two
	// runs (see newWaiter).
	spinShare int
}

// newWaiter returns a pacing task's waiter: precise, or the runtime's own
// sleep. outside says the engine under test runs in another process (a
// target, external workers): its processes compete with a spinning pacer
// for the machine's cores, so the spin is bounded to a quarter of the gap
// between runs. Spinning from run to run cost a target in another process
// 17-55% on its start-to-step time at 1,000 runs/s on a busy 2-core
// machine (BenchmarkProtocolPacing in CI); an engine in this process
// shares the runtime's processors with the pacer, which yields its
// processor at every run, and was not slowed.
func newWaiter(rt world.Runtime, precise, outside bool) *waiter {
	w := &waiter{rt: rt, release: func() {}, spinShare: 1}
	if outside {
		w.spinShare = outsideSpinShare
	}
	if !precise {
		return w
	}
	c := Calibrate()
	w.window, w.lead = c.SpinWindow, initialLead
	w.sleep, w.release = coarseSleep()
	return w
}

// precise reports whether w waits precisely (hands runs off early).
func (w *waiter) precise() bool { return w.sleep != nil }

// coarse sleeps d in the coarse sleep and lets the spin window follow how
// late it woke.
func (w *waiter) coarse(d time.Duration) {
	t := w.rt.Now()
	w.sleep(d)
	if p99, ok := w.over.add(max(w.rt.Now()-t-d, 0)); ok {
		w.window = spinWindow(p99)
	}
}

// leadFor is how long before a run's schedule to hand it off, gap after
// the previous run's (0: none). Zero when not precise.
func (w *waiter) leadFor(gap time.Duration) time.Duration {
	if !w.precise() {
		return 0
	}
	if gap > 0 {
		return min(w.lead, gap/2)
	}
	return w.lead
}

// handedOff records that a hand-off took d (from waking the starter to
// the starter running) and lets the lead follow.
func (w *waiter) handedOff(d time.Duration) {
	if p99, ok := w.handoffs.add(d); ok {
		w.lead = withMargin(p99, minLead, maxLead)
	}
}

// until waits until the runtime's clock reads at, or ctx is done. It may
// return early only when ctx is done. gap is the time between this run's
// schedule and the previous run's (0: none): the spin covers at most gap/spinShare, so
// with an engine in this process (spinShare 1) the pacer spins from one
// run to the next only when the machine's sleeps overshoot the gap.
func (w *waiter) until(ctx context.Context, at, gap time.Duration) {
	if !w.precise() {
		if left := at - w.rt.Now(); left > 0 {
			_ = w.rt.Sleep(ctx, left)
		}
		return
	}
	window := w.window
	if gap > 0 {
		window = min(window, gap/time.Duration(w.spinShare))
	}
	// A long wait sleeps on the runtime (cancellable, about 1 ms late)
	// until coarseStretch before the window; the coarse sleep, which
	// cannot be cancelled, only ever sleeps that last stretch.
	for {
		left := at - w.rt.Now()
		if left <= window {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if d := left - window; d > 2*coarseStretch {
			_ = w.rt.Sleep(ctx, d-coarseStretch)
		} else {
			w.coarse(d)
		}
	}
	for spins := 0; w.rt.Now() < at; spins++ {
		if spins&63 == 63 && ctx.Err() != nil {
			return
		}
	}
}

// starters start runs on goroutines that outlive them (world.Workers):
// a run is never queued behind another's start (a start request through
// the protocol may take milliseconds). Real time only: in virtual time
// every task must be the runtime's (the runtime's Go per run).
type starters struct {
	rt      world.Runtime
	workers *world.Workers // nil: the runtime's Go per run
}

func newStarters(rt world.Runtime, real bool) *starters {
	s := &starters{rt: rt}
	if real {
		s.workers = world.NewWorkers()
	}
	return s
}

// start runs fn on an idle starter, or a new one.
func (s *starters) start(fn func()) {
	if s.workers == nil {
		s.rt.Go(fn)
		return
	}
	s.workers.Go(fn)
}

// close lets the starters end once their runs started; start must not be
// called after it.
func (s *starters) close() {
	if s.workers != nil {
		s.workers.Close()
	}
}
