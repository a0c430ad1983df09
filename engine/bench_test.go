package engine_test

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
	"github.com/durabench/durabench/world/mem"
)

// benchObserver tracks the one run in flight: its latest step body end and
// its end. It is as cheap as an observer can be, so the benchmark measures
// the engine, not the observer.
type benchObserver struct {
	cur atomic.Pointer[benchRun]
}

type benchRun struct {
	id      string
	lastEnd atomic.Int64
	done    chan struct{}
}

func (o *benchObserver) StepBody(run string, s engine.StepSpan) {
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
func (o *benchObserver) HookCreated(string, string, time.Duration) {}
func (o *benchObserver) StreamChunk(string, engine.ChunkSpan)      {}
func (o *benchObserver) RunFinished(run string, _ time.Duration, _ bool) {
	if r := o.cur.Load(); r != nil && r.id == run {
		close(r.done)
	}
}

// runTimeout bounds one run in a benchmark: a stuck run fails the benchmark
// instead of hanging make bench.
const runTimeout = 30 * time.Second

// engineRig is an engine on a counted world, running one run at a time.
type engineRig struct {
	w   *countingWorld
	e   *engine.Engine
	obs *benchObserver
	rt  world.Runtime
}

func newEngineRig(b *testing.B, w world.World, f engine.Features) *engineRig {
	b.Helper()
	cw := newCountingWorld(w)
	obs := &benchObserver{}
	e, err := engine.New(engine.Config{World: cw, Features: f, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return &engineRig{w: cw, e: e, obs: obs, rt: w.Runtime()}
}

// run executes one run of p and returns its TTLS (latest body end - t0).
func (g *engineRig) run(ctx context.Context, id string, p engine.Program) (time.Duration, error) {
	r := &benchRun{id: id, done: make(chan struct{})}
	g.obs.cur.Store(r)
	t0 := g.rt.Now()
	if err := g.e.StartRun(ctx, id, p); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
	case <-time.After(runTimeout):
		return 0, fmt.Errorf("engine run %s did not finish in %v", id, runTimeout)
	}
	return time.Duration(r.lastEnd.Load()) - t0, nil
}

// fanOutBranches are the fan-out widths benchmarked (DESIGN.md's sweep).
var fanOutBranches = []int{1, 20, 256}

// warmupRuns are run and discarded before timing: they size the worlds'
// maps and the engine's caches.
const warmupRuns = 3

// BenchmarkFanOutMem runs one fan-out per iteration on the mem world for
// every version and width, and in the same iteration the floor: the same
// world operations issued directly with no engine (floor_test.go), on its
// own fresh mem world. Engine and floor alternate, so noise on the shared
// machine hits both alike. It reports TTLS p50 of the engine
// (ttls-p50-us) and of the floor (floor-ttls-p50-us), their ratio, and the
// world operations per run of each, which must match.
func BenchmarkFanOutMem(b *testing.B) {
	for _, v := range engine.Versions() {
		for _, n := range fanOutBranches {
			b.Run(fmt.Sprintf("%s/branches=%d", v.Name, n), func(b *testing.B) {
				benchFanOut(b, v.Features, n, func() world.World { return mem.New(world.Options{}) })
			})
		}
	}
}

// benchFanOut is the engine-vs-floor loop shared by every world.
func benchFanOut(b *testing.B, f engine.Features, n int, newWorld func() world.World) {
	ctx := context.Background()
	ew, fw := newWorld(), newWorld()
	defer ew.Close()
	defer fw.Close()
	rig := newEngineRig(b, ew, f)
	defer rig.e.Stop(ctx)
	p := engine.FanOut(n)
	fl := newFloor(newCountingWorld(fw), f, n, len(mustJSON(p)))
	if err := fl.start(ctx, 512); err != nil {
		b.Fatal(err)
	}
	defer fl.stop(ctx)
	fcw := fl.w.(*countingWorld)

	// one runs the engine and the floor once each, alternating which goes
	// first, so neither always inherits the other's garbage.
	one := func(i int) (eng, flo time.Duration) {
		id := "r" + strconv.Itoa(i)
		var err error
		runEngine := func() {
			if eng, err = rig.run(ctx, id, p); err != nil {
				b.Fatal(err)
			}
		}
		runFloor := func() {
			if flo, err = fl.run(ctx, id, runTimeout); err != nil {
				b.Fatal(err)
			}
		}
		if i%2 == 0 {
			runEngine()
			runFloor()
		} else {
			runFloor()
			runEngine()
		}
		return eng, flo
	}
	for i := range warmupRuns {
		one(-1 - i)
	}
	e0, f0 := rig.w.snapshot(), fcw.snapshot()
	var engT, floT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e, f := one(i)
		engT, floT = append(engT, e), append(floT, f)
	}
	b.StopTimer()
	eOps, fOps := rig.w.snapshot().sub(e0), fcw.snapshot().sub(f0)
	ep, fp := median(engT), median(floT)
	b.ReportMetric(us(ep), "ttls-p50-us")
	b.ReportMetric(us(fp), "floor-ttls-p50-us")
	b.ReportMetric(float64(ep)/float64(fp), "ratio")
	b.ReportMetric(float64(eOps.total())/float64(b.N), "ops/run")
	b.ReportMetric(float64(fOps.total())/float64(b.N), "floor-ops/run")
	if testing.Verbose() {
		b.Logf("engine %v\nfloor  %v", eOps, fOps)
	}
}

func median(ds []time.Duration) time.Duration {
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

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// mustJSON is p as the engine stores it as run input.
func mustJSON(p engine.Program) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkEngineMem256 runs only the engine, one 256-branch fan-out per
// iteration, for every version: the figure to profile (go test
// -cpuprofile) and to compare before and after an engine optimization.
// Its allocations include the mem world's, which do not change as long as
// the engine issues the same world operations.
func BenchmarkEngineMem256(b *testing.B) {
	for _, v := range engine.Versions() {
		b.Run(v.Name, func(b *testing.B) {
			ctx := context.Background()
			w := mem.New(world.Options{})
			defer w.Close()
			rig := newEngineRig(b, w, v.Features)
			defer rig.e.Stop(ctx)
			p := engine.FanOut(256)
			for i := range warmupRuns {
				if _, err := rig.run(ctx, "w"+strconv.Itoa(i), p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, err := rig.run(ctx, "r"+strconv.Itoa(i), p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(us(processCPU()-cpu0)/float64(b.N), "cpu-us/op")
		})
	}
}
