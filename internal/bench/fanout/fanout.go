// Package fanout measures the engine against its floor: one fan-out run of
// a version on a world, and the same world operations issued directly with
// no engine (Floor), alternated in one benchmark so that the noise of a
// shared machine hits both alike. The ratio of the two TTLS medians is what
// durabench adds to what it measures.
package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// RunTimeout bounds one run: a stuck run fails the benchmark instead of
// hanging make bench.
const RunTimeout = 30 * time.Second

// Concurrency is the queue concurrency of the engine and of the floor: the
// engine's default, a deployment's function concurrency.
const Concurrency = engine.DefaultConcurrency

// WarmupRuns are run and discarded before timing by default: they size the
// worlds' maps and the engine's caches.
const WarmupRuns = 3

// Options tune Bench.
type Options struct {
	// Warmup is the number of untimed runs of each side first
	// (default WarmupRuns).
	Warmup int
	// WorldFloor also runs the floor on a world of the engine's kind.
	WorldFloor bool
}

// observer tracks the runs in flight: each one's latest step end and
// its end. It is as cheap as an observer can be, so the benchmark measures
// the engine, not the observer.
type observer struct {
	cur atomic.Pointer[engineRun]
}

type engineRun struct {
	id      string
	lastEnd atomic.Int64
	done    chan struct{}
}

func (o *observer) StepBody(run string, s engine.StepSpan) {
	r := o.cur.Load()
	if r == nil || r.id != run {
		return
	}
	for {
		old := r.lastEnd.Load()
		if int64(s.End) <= old || r.lastEnd.CompareAndSwap(old, int64(s.End)) {
			return
		}
	}
}
func (o *observer) HookCreated(string, string, time.Duration) {}
func (o *observer) StreamChunk(string, engine.ChunkSpan)      {}
func (o *observer) RunFinished(run string, _ time.Duration, _ bool) {
	if r := o.cur.Load(); r != nil && r.id == run {
		close(r.done)
	}
}

// Engine is an engine on a counted world, running one run at a time.
type Engine struct {
	W   *CountingWorld
	e   *engine.Engine
	obs *observer
	rt  world.Runtime
}

// NewEngine starts an engine of features f on w (wrapped in a CountingWorld).
func NewEngine(ctx context.Context, w world.World, f engine.Features) (*Engine, error) {
	cw := NewCountingWorld(w)
	obs := &observer{}
	e, err := engine.New(engine.Config{World: cw, Features: f, Observer: obs, Concurrency: Concurrency})
	if err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	return &Engine{W: cw, e: e, obs: obs, rt: w.Runtime()}, nil
}

// Stop stops the engine's consumer.
func (g *Engine) Stop(ctx context.Context) error { return g.e.Stop(ctx) }

// Run executes one run of p and returns its TTLS (latest step end - t0).
func (g *Engine) Run(ctx context.Context, id string, p engine.Program) (time.Duration, error) {
	r := &engineRun{id: id, done: make(chan struct{})}
	g.obs.cur.Store(r)
	t0 := g.rt.Now()
	if err := g.e.StartRun(ctx, id, p); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
	case <-time.After(RunTimeout):
		return 0, fmt.Errorf("engine run %s did not finish in %v", id, RunTimeout)
	}
	return time.Duration(r.lastEnd.Load()) - t0, nil
}

// Bench runs one n-branch fan-out of version f per iteration on a world
// from newWorld, and the floor of the same operations on a world from
// newFloorWorld (another of the same kind, or the raw operations the world
// is built on), in alternating order. It reports the TTLS medians of the
// engine (ttls-p50-us) and of the floor (floor-ttls-p50-us), their ratio,
// and the world operations per run of each (ops/run, floor-ops/run), which
// should match: the floor reproduces the protocol, races included, and a
// version whose operation count depends on timing shows it here.
//
// With Options.WorldFloor the floor also runs on a world from newWorld, and
// the ratio splits in two: engine/world-floor is the engine's own share,
// world-floor/floor the world implementation's share over the raw
// operations.
func Bench(b *testing.B, f engine.Features, n int, newWorld, newFloorWorld func() (world.World, error), opt Options) {
	if opt.Warmup <= 0 {
		opt.Warmup = WarmupRuns
	}
	ctx := context.Background()
	open := func(newW func() (world.World, error)) world.World {
		w, err := newW()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = w.Close() })
		return w
	}
	eng, err := NewEngine(ctx, open(newWorld), f)
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Stop(ctx)
	p := engine.FanOut(n)
	input, _ := json.Marshal(p) // the engine stores its program as run input
	startFloor := func(w world.World) (*Floor, *CountingWorld) {
		cw := NewCountingWorld(w)
		fl := NewFloor(cw, f, n, len(input))
		if err := fl.Start(ctx, Concurrency); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = fl.Stop(ctx) })
		return fl, cw
	}
	fl, fcw := startFloor(open(newFloorWorld))
	var wfl *Floor
	if opt.WorldFloor {
		wfl, _ = startFloor(open(newWorld))
	}

	// sides run in a rotating order each iteration, so none always
	// inherits another's garbage.
	type side func(id string) time.Duration
	sides := []side{
		func(id string) time.Duration {
			d, err := eng.Run(ctx, id, p)
			if err != nil {
				b.Fatal(err)
			}
			return d
		},
		func(id string) time.Duration {
			d, err := fl.Run(ctx, id, RunTimeout)
			if err != nil {
				b.Fatal(err)
			}
			return d
		},
	}
	if wfl != nil {
		sides = append(sides, func(id string) time.Duration {
			d, err := wfl.Run(ctx, id, RunTimeout)
			if err != nil {
				b.Fatal(err)
			}
			return d
		})
	}
	times := make([][]time.Duration, len(sides))
	one := func(i int, keep bool) {
		id := "r" + strconv.Itoa(i)
		for k := range sides {
			j := (i + k) % len(sides)
			if i < 0 {
				j = k
			}
			d := sides[j](id)
			if keep {
				times[j] = append(times[j], d)
			}
		}
	}
	for i := range opt.Warmup {
		one(-1-i, false)
	}
	e0, f0 := eng.W.Snapshot(), fcw.Snapshot()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		one(i, true)
	}
	b.StopTimer()
	eOps, fOps := eng.W.Snapshot().Sub(e0), fcw.Snapshot().Sub(f0)
	ep, fp := Median(times[0]), Median(times[1])
	b.ReportMetric(Micros(ep), "ttls-p50-us")
	b.ReportMetric(Micros(fp), "floor-ttls-p50-us")
	b.ReportMetric(float64(ep)/float64(fp), "ratio")
	b.ReportMetric(float64(eOps.Total())/float64(b.N), "ops/run")
	b.ReportMetric(float64(fOps.Total())/float64(b.N), "floor-ops/run")
	if wfl != nil {
		wp := Median(times[2])
		b.ReportMetric(Micros(wp), "world-floor-ttls-p50-us")
		b.ReportMetric(float64(ep)/float64(wp), "engine/world-floor")
		b.ReportMetric(float64(wp)/float64(fp), "world-floor/floor")
	}
	if testing.Verbose() {
		b.Logf("engine %v\nfloor  %v", eOps, fOps)
	}
}

// Median is the median of ds (0 for none).
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Micros is d in microseconds.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
