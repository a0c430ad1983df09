package driver

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
)

// Open pacing charges every microsecond a run starts late to the engine
// (latency is anchored on the schedule), so the driver waits for a run's
// scheduled start more precisely than the machine sleeps: it sleeps
// coarsely until a spin window before the schedule, then spins with yields
// (runtime.Gosched, so the runs it just started get the processor) until
// the schedule. The window is the coarse sleep's overshoot, measured once
// per process (Calibrate), then the p90 overshoot of the pacer's own
// recent sleeps (waiter.coarse).
//
// Why the window is needed: Go's timers park an idle processor in
// epoll_wait, whose timeout has millisecond resolution, so time.Sleep of
// anything under 1 ms returns after about 1 ms. A nanosleep system call
// has the kernel's high-resolution timers (tens of µs late); Calibrate
// measures both and keeps the one that overshoots less.

// Calibration is how precisely this machine sleeps, measured once per
// process by Calibrate, and the spin window the driver derives from it.
// Results files record it (results.Host.Pacer).
type Calibration struct {
	// Sleep names the coarse sleep the driver uses: "nanosleep" (the
	// system call, Linux) or "time.Sleep".
	Sleep string
	// OvershootP50 and OvershootP90 are how late the coarse sleep returned
	// over calibrationSamples sleeps of calibrationSleep.
	OvershootP50, OvershootP90 time.Duration
	// SleepOvershootP50 is time.Sleep's median overshoot (the figure that
	// made precise pacing necessary), measured whichever sleep is used.
	SleepOvershootP50 time.Duration
	// SpinWindow is how long before a run's schedule the coarse sleep ends
	// and spinning begins, for a cell's first waits: OvershootP90 with a
	// margin, within [minSpinWindow, maxSpinWindow]. Later waits follow
	// the cell's own sleeps.
	SpinWindow time.Duration
}

const (
	calibrationSamples = 24
	calibrationSleep   = 100 * time.Microsecond
	minSpinWindow      = 20 * time.Microsecond
	// maxSpinWindow bounds the CPU a wait may spin: on a machine whose
	// sleeps overshoot more (an overloaded one) lag is the machine's.
	maxSpinWindow = 2 * time.Millisecond
	// gapSpinShare: a wait spins at most 1/gapSpinShare of the gap
	// between two runs' schedules.
	gapSpinShare = 4
	// coarseStretch is how much of a long wait is left to the coarse
	// sleep after the runtime's: more than the runtime's overshoot.
	coarseStretch = 3 * time.Millisecond
)

var calibration = sync.OnceValue(measureCalibration)

// Calibrate returns this process's sleep calibration, measuring it on the
// first call (about 30 ms: calibrationSamples sleeps of each kind).
func Calibrate() Calibration { return calibration() }

func measureCalibration() Calibration {
	overshoot := func(sleep func(time.Duration)) []time.Duration {
		v := make([]time.Duration, calibrationSamples)
		for i := range v {
			t := time.Now()
			sleep(calibrationSleep)
			v[i] = max(time.Since(t)-calibrationSleep, 0)
		}
		slices.Sort(v)
		return v
	}
	std := overshoot(time.Sleep)
	c := Calibration{Sleep: "time.Sleep", OvershootP50: quantile(std, 0.5), OvershootP90: quantile(std, 0.9)}
	c.SleepOvershootP50 = c.OvershootP50
	if nanosleep != nil {
		ns := overshoot(nanosleep)
		if p90 := quantile(ns, 0.9); p90 < c.OvershootP90 {
			c.Sleep, c.OvershootP50, c.OvershootP90 = "nanosleep", quantile(ns, 0.5), p90
		}
	}
	c.SpinWindow = min(max(c.OvershootP90+c.OvershootP90/4, minSpinWindow), maxSpinWindow)
	return c
}

// Record is c as a results file records it.
func (c Calibration) Record() *results.PacerCalibration {
	return &results.PacerCalibration{Sleep: c.Sleep, OvershootP50US: us(c.OvershootP50), OvershootP90US: us(c.OvershootP90),
		GoSleepOvershootP50US: us(c.SleepOvershootP50), SpinWindowUS: us(c.SpinWindow)}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// quantile is the nearest-rank q-quantile of sorted v.
func quantile(v []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(v))+0.5) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// coarseSleep returns the sleep c names.
func (c Calibration) coarseSleep() func(time.Duration) {
	if c.Sleep == "nanosleep" && nanosleep != nil {
		return nanosleep
	}
	return time.Sleep
}

// waiter waits until a scheduled time on the runtime's clock: precisely
// (coarse sleep, then spin with yields) in real time, with the runtime's
// own Sleep in virtual time or when precision is off. One pacing task
// owns it (it is not safe for concurrent use).
type waiter struct {
	rt     world.Runtime
	window time.Duration
	sleep  func(time.Duration) // the coarse sleep; nil: not precise
	// over holds the overshoots of the last overshootRing coarse sleeps:
	// the window follows their p90. A sleep overshoots more the longer it
	// is (BenchmarkSleepOvershoot, this VM: 33 µs at p50 for 100 µs, 73 µs
	// for 2 ms: the vCPU idles deeper), so the calibration's short sleeps
	// set the window of the first waits only; at 500 runs/s a window from
	// them left lag p50 at 28-42 µs.
	over  [overshootRing]time.Duration
	nOver int
}

// overshootRing is how many recent coarse sleeps the spin window follows.
const overshootRing = 32

func newWaiter(rt world.Runtime, precise bool) *waiter {
	w := &waiter{rt: rt}
	if precise {
		c := Calibrate()
		w.window, w.sleep = c.SpinWindow, c.coarseSleep()
	}
	return w
}

// coarse sleeps d in the coarse sleep and lets the spin window follow how
// late it woke: p90 of the last overshootRing sleeps with a quarter's
// margin, within [minSpinWindow, maxSpinWindow].
func (w *waiter) coarse(d time.Duration) {
	t := w.rt.Now()
	w.sleep(d)
	w.over[w.nOver%overshootRing] = max(w.rt.Now()-t-d, 0)
	w.nOver++
	if w.nOver%(overshootRing/4) != 0 || w.nOver < overshootRing {
		return
	}
	v := w.over
	slices.Sort(v[:])
	p90 := quantile(v[:], 0.9)
	w.window = min(max(p90+p90/4, minSpinWindow), maxSpinWindow)
}

// until waits until the runtime's clock reads at, or ctx is done. It may
// return early only when ctx is done. gap is the time since the previous
// run's schedule (0: none): the spin covers at most gapSpinShare of it, so
// at rates whose gap is shorter than the window the pacer still sleeps
// between runs instead of spinning all the time — a thread that never
// sleeps is the first the kernel's scheduler descheduled on a busy
// machine (at 20,000 runs/s and a load average of 24, lag p50 45 ms
// spinning against 1.1 ms sleeping).
func (w *waiter) until(ctx context.Context, at, gap time.Duration) {
	if w.sleep == nil {
		if left := at - w.rt.Now(); left > 0 {
			_ = w.rt.Sleep(ctx, left)
		}
		return
	}
	// The runs just started (each on its own goroutine, queued on this
	// processor) get it before this thread blocks in the coarse sleep.
	runtime.Gosched()
	window := w.window
	if gap > 0 {
		window = min(window, gap/gapSpinShare)
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
		runtime.Gosched()
	}
}

// starters start runs on goroutines that outlive them: a run is handed to
// a starter goroutine idle since its last run, and only when none is idle
// does a new goroutine start (and stay, once its run started, for the
// next). A goroutine per run grew its stack afresh for every StartRun —
// a tenth of the driver's CPU at 50,000 runs/s — and a run is never queued
// behind another's start (a start request through the protocol may take
// milliseconds). Real time only: in virtual time every task must be the
// runtime's (the runtime's Go per run).
type starters struct {
	rt   world.Runtime
	jobs chan func() // nil: the runtime's Go per run
}

func newStarters(rt world.Runtime, real bool) *starters {
	s := &starters{rt: rt}
	if real {
		s.jobs = make(chan func())
	}
	return s
}

// start runs fn on an idle starter, or a new one.
func (s *starters) start(fn func()) {
	if s.jobs == nil {
		s.rt.Go(fn)
		return
	}
	select {
	case s.jobs <- fn:
	default:
		go func() {
			fn()
			for fn := range s.jobs {
				fn()
			}
		}()
	}
}

// close lets the starters end once their runs started; start must not be
// called after it.
func (s *starters) close() {
	if s.jobs != nil {
		close(s.jobs)
	}
}
