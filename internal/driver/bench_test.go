package driver

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// nullEngine is the engine of the pacer benchmark: a run finishes the
// moment it is started, so everything measured is the driver's.
type nullEngine struct {
	rt  world.Runtime
	obs engine.Observer
}

func (n *nullEngine) Attach(_ context.Context, obs engine.Observer, _ func(string, time.Duration, error)) (func(), error) {
	n.obs = obs
	return func() {}, nil
}

func (n *nullEngine) StartRun(_ context.Context, id string, _ engine.Program) error {
	n.obs.RunFinished(id, n.rt.Now(), false)
	return nil
}

func (n *nullEngine) ResumeHook(context.Context, string, string, []byte) error { return nil }

// InProcess: the null engine runs in the driver's process (the pacer may
// spin from run to run, as with the built-in engine).
func (n *nullEngine) InProcess() bool { return true }

// cpuTime is the process's user + system CPU time (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cellFigures are one open-paced cell's driver figures.
type cellFigures struct {
	lagP50, lagP99 time.Duration
	runsPerSec     float64 // measured runs / the measured phase's duration
	cpuShare       float64 // CPU time / wall time of the cell (1 = one core)
	failed         int
}

// runOpen runs one open-paced cell of runs single-step runs at rate on
// target (nil: the built-in engine on w) and returns its figures.
func runOpen(tb testing.TB, w world.World, target Target, rate float64, runs int, coarse bool) cellFigures {
	tb.Helper()
	cpu0, wall0 := cpuTime(), time.Now()
	res, err := Run(context.Background(), Config{World: w, Features: versionTB(tb, "resilient"),
		Program: engine.FanOut(1), RunPrefix: fmt.Sprintf("b%d", time.Now().UnixNano()), Reps: runs, Warmup: runs / 10,
		Pacer: OpenRate{Rate: rate}, CellTimeout: 60 * time.Second, Target: target, CoarsePacing: coarse})
	if err != nil {
		tb.Fatal(err)
	}
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	lag := slices.Clone(res.Lag)
	slices.Sort(lag)
	f := cellFigures{lagP50: quantile(lag, 0.5), lagP99: quantile(lag, 0.99),
		runsPerSec: float64(len(res.Timelines)) / res.Elapsed.Seconds(), cpuShare: cpu.Seconds() / wall.Seconds()}
	for _, tl := range res.Timelines {
		if tl.Failed || !tl.Finished {
			f.failed++
		}
	}
	if f.failed > 0 || len(res.Unstarted) > 0 {
		tb.Errorf("%d runs failed or unfinished, %d unstarted", f.failed, len(res.Unstarted))
	}
	return f
}

func versionTB(tb testing.TB, name string) engine.Features {
	v, err := engine.LookupVersion(name)
	if err != nil {
		tb.Fatal(err)
	}
	return v.Features
}

// BenchmarkPacer: driver lag (actual − scheduled start) of open pacing
// against a null engine and against the built-in engine on mem (single
// step), precise and coarse (sleeping on the runtime)
// alternately in each iteration, with the process's CPU share for each.
// One iteration is a cell of half a second at the rate, beside the
// machine's floors measured in the same iteration: the lag of an ideal
// pacer (machineFloor) and how late a sleeping thread wakes (wakeFloor).
func BenchmarkPacer(b *testing.B) {
	c := Calibrate()
	b.Logf("calibration: %s overshoots p50 %v p90 %v p99 %v (time.Sleep p50 %v); spin window %v",
		c.Sleep, c.OvershootP50, c.OvershootP90, c.OvershootP99, c.SleepOvershootP50, c.SpinWindow)
	for _, bc := range []struct {
		engine string
		rate   float64
	}{{"null", 500}, {"null", 5000}, {"null", 20000}, {"mem", 500}, {"mem", 5000}} {
		b.Run(fmt.Sprintf("%s/rate=%g", bc.engine, bc.rate), func(b *testing.B) {
			var precise, coarse []cellFigures
			var floor, wake []time.Duration
			for range b.N {
				floor = append(floor, machineFloor(bc.rate, time.Second/2))
				wake = append(wake, wakeFloor())
				for _, crs := range []bool{false, true} {
					w := mem.New(world.Options{})
					var target Target // the built-in engine
					if bc.engine == "null" {
						target = &nullEngine{rt: w.Runtime()}
					}
					f := runOpen(b, w, target, bc.rate, int(bc.rate/2), crs)
					w.Close()
					if crs {
						coarse = append(coarse, f)
					} else {
						precise = append(precise, f)
					}
				}
			}
			p, k := medianFigures(precise), medianFigures(coarse)
			b.ReportMetric(us(p.lagP50), "lag-p50-us")
			b.ReportMetric(us(p.lagP99), "lag-p99-us")
			b.ReportMetric(100*p.cpuShare, "cpu-%")
			b.ReportMetric(us(k.lagP50), "coarse-lag-p50-us")
			b.ReportMetric(us(k.lagP99), "coarse-lag-p99-us")
			b.ReportMetric(100*k.cpuShare, "coarse-cpu-%")
			b.ReportMetric(float64(p.lagP99)/float64(max(k.lagP99, time.Microsecond)), "precise/coarse")
			slices.Sort(floor)
			b.ReportMetric(us(floor[len(floor)/2]), "floor-lag-p99-us")
			slices.Sort(wake)
			b.ReportMetric(us(wake[len(wake)/2]), "wake-p99-us")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSleepOvershoot: how late the pacer's coarse sleep (a timerfd
// read on Linux) wakes, by sleep length — why the spin window follows the
// pacer's own sleeps rather than the calibration's short ones: 200 sleeps
// of each length an iteration, p50, p90 and p99 of the overshoot.
func BenchmarkSleepOvershoot(b *testing.B) {
	sleep, release := coarseSleep()
	defer release()
	for _, d := range []time.Duration{100 * time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond} {
		b.Run(fmt.Sprintf("sleep=%v", d), func(b *testing.B) {
			var over []time.Duration
			for range b.N {
				over = append(over, overshoots(sleep, d, 200)...)
			}
			slices.Sort(over)
			b.ReportMetric(us(quantile(over, 0.5)), "overshoot-p50-us")
			b.ReportMetric(us(quantile(over, 0.9)), "overshoot-p90-us")
			b.ReportMetric(us(quantile(over, 0.99)), "overshoot-p99-us")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// machineFloor is the lag p99 an ideal pacer would have on this machine at
// rate for d: one goroutine, locked to its thread, reads the clock in a
// tight loop for d and notes every gap between two reads (the time its
// thread was not running: the kernel or the hypervisor ran something
// else); a run scheduled inside a gap starts when the gap ends: lag no
// pacer can undo.
func machineFloor(rate float64, d time.Duration) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type gap struct{ from, to time.Duration }
	var gaps []gap
	start := time.Now()
	prev := time.Duration(0)
	for prev < d {
		now := time.Since(start)
		if now-prev > time.Microsecond {
			gaps = append(gaps, gap{prev, now})
		}
		prev = now
	}
	n := int(rate * d.Seconds())
	lag := make([]time.Duration, n)
	g := 0
	for i := range lag {
		at := time.Duration(float64(i) / rate * float64(time.Second))
		for g < len(gaps) && gaps[g].to <= at {
			g++
		}
		if g < len(gaps) && gaps[g].from < at {
			lag[i] = gaps[g].to - at
		}
	}
	slices.Sort(lag)
	return quantile(lag, 0.99)
}

// wakeFloor is how late this machine wakes a sleeping thread: the p99
// overshoot of the pacer's coarse sleep (the timerfd on Linux) over 1,500
// sleeps of 100 µs (about a quarter second). The machine floor does not
// see it — a thread that never sleeps is never woken — and a host slow to
// wake idle vCPUs lengthens every coarse sleep the spin window does not
// cover.
func wakeFloor() time.Duration {
	sleep, release := coarseSleep()
	defer release()
	return quantile(overshoots(sleep, calibrationSleep, 1500), 0.99)
}

// BenchmarkCapacityInProcess: how many single-step runs per second one
// driver sustains with the built-in engine on mem, open-paced at 50,000/s
// (runs / the measured phase, which ends when the last run finished),
// against the same driver on a null engine (the driver's own ceiling).
func BenchmarkCapacityInProcess(b *testing.B) {
	const rate, runs = 50000, 25000
	var eng, null []cellFigures
	for range b.N {
		w := mem.New(world.Options{})
		eng = append(eng, runOpen(b, w, nil, rate, runs, false))
		w.Close()
		w = mem.New(world.Options{})
		null = append(null, runOpen(b, w, &nullEngine{rt: w.Runtime()}, rate, runs, false))
		w.Close()
	}
	e, n := medianFigures(eng), medianFigures(null)
	b.ReportMetric(e.runsPerSec, "runs/s")
	b.ReportMetric(n.runsPerSec, "null-runs/s")
	b.ReportMetric(e.runsPerSec/n.runsPerSec, "engine/null")
	b.ReportMetric(us(e.lagP50), "lag-p50-us")
	b.ReportMetric(us(e.lagP99), "lag-p99-us")
	b.ReportMetric(100*e.cpuShare, "cpu-%")
	b.ReportMetric(us(n.lagP99), "null-lag-p99-us")
	b.ReportMetric(0, "ns/op")
}

// medianFigures is the median of each figure over the iterations.
func medianFigures(fs []cellFigures) cellFigures {
	med := func(get func(cellFigures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return cellFigures{
		lagP50:     time.Duration(med(func(f cellFigures) float64 { return float64(f.lagP50) })),
		lagP99:     time.Duration(med(func(f cellFigures) float64 { return float64(f.lagP99) })),
		runsPerSec: med(func(f cellFigures) float64 { return f.runsPerSec }),
		cpuShare:   med(func(f cellFigures) float64 { return f.cpuShare }),
	}
}
