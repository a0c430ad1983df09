package rawjs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/internal/bench/rawjs"
	natsworld "github.com/durabench/durabench/world/nats"
)

// Soak parameters: runs in flight, branches per run, and how long each
// side's closed loop runs after its warm-up (DURABENCH_SOAK, a Go duration;
// make bench runs 10 s, make soak 60 s).
const (
	soakInFlight = 64
	soakBranches = 256
	soakWarmup   = 5 * time.Second
	// soakSteady is when the engine side's memory can be steady: the
	// streams remember message ids for a minute at the default visibility
	// timeout (natsworld's dedup window), so the heap grows for the first
	// minute of any closed loop, by design, and is flat after it. The heap
	// check (soaks of a minute or more: make soak) starts from there.
	soakSteady = time.Minute + soakWarmup
)

func soakDuration(b *testing.B) time.Duration {
	if s := os.Getenv("DURABENCH_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("DURABENCH_SOAK=%q: %v", s, err)
		}
		return d
	}
	return 10 * time.Second
}

// BenchmarkSoakNATS is a closed-loop soak on the default world: 64 runs in
// flight × 256-branch pending-count fan-outs on embedded NATS JetStream,
// each finished run replaced at once, for DURABENCH_SOAK after a 5 s
// warm-up (65 s when the soak lasts a minute or more, see soakSteady);
// then the same closed loop of the floor (the same world
// operations as raw JetStream calls, internal/bench/fanout.Floor on rawjs.World).
// It reports steps/s of each and their ratio (target >= 0.8), and fails
// when a run is lost (not finished within fanout.RunTimeout), when the
// world counted an incident, or (soaks of a minute or more) when the heap
// after the loop (after a GC) is more than 1.5x the heap after the warm-up. DURABENCH_SOAK_HEAPPROFILE
// names a file prefix for a heap profile taken at the end of each loop.
func BenchmarkSoakNATS(b *testing.B) {
	d := soakDuration(b)
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		checkHeap := d >= time.Minute
		warmup := soakWarmup
		if checkHeap {
			warmup = soakSteady
		}
		eng := soakEngine(b, v.Features, warmup, d)
		floor := soakFloor(b, v.Features, d)
		b.ReportMetric(eng.stepsPerSec, "steps/s")
		b.ReportMetric(floor.stepsPerSec, "floor-steps/s")
		b.ReportMetric(eng.stepsPerSec/floor.stepsPerSec, "engine/floor")
		b.ReportMetric(eng.heapGrowth, "heap-end/warm")
		b.ReportMetric(float64(eng.runs), "runs")
		b.Logf("engine: %d runs, %.0f steps/s, heap %.0f MB after warm-up, %.0f MB at the end (x%.2f); floor: %d runs, %.0f steps/s",
			eng.runs, eng.stepsPerSec, eng.heapWarm/1e6, eng.heapEnd/1e6, eng.heapGrowth, floor.runs, floor.stepsPerSec)
		if checkHeap && eng.heapGrowth > 1.5 {
			b.Errorf("heap grew x%.2f over the soak (limit 1.5)", eng.heapGrowth)
		}
	}
}

type soakResult struct {
	runs                          int64
	stepsPerSec                   float64
	heapWarm, heapEnd, heapGrowth float64
}

// heap is the live heap after a collection.
func heap() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// closedLoop keeps inFlight calls of run going until warmup and then d
// have passed, counting the runs that finished after the warm-up.
func closedLoop(b *testing.B, warmup, d time.Duration, run func(id string) error) soakResult {
	b.Helper()
	var (
		next     atomic.Int64
		measured atomic.Int64
		measure  atomic.Bool
		stop     atomic.Bool
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range soakInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				id := fmt.Sprintf("soak-%d", next.Add(1))
				counted := measure.Load()
				if err := run(id); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				if counted && measure.Load() {
					measured.Add(1)
				}
			}
		}()
	}
	time.Sleep(warmup)
	warm := heap()
	began := time.Now()
	measure.Store(true)
	time.Sleep(d)
	measure.Store(false)
	elapsed := time.Since(began)
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("soak: %v", firstErr)
	}
	end := heap()
	if path := os.Getenv("DURABENCH_SOAK_HEAPPROFILE"); path != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", path, next.Load())); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	r := soakResult{runs: measured.Load(), heapWarm: warm, heapEnd: end, heapGrowth: end / warm}
	r.stepsPerSec = float64(r.runs*soakBranches) / elapsed.Seconds()
	return r
}

// soakObserver signals each run's end.
type soakObserver struct{ done sync.Map } // run -> chan struct{}

func (o *soakObserver) StepBody(string, engine.StepSpan)          {}
func (o *soakObserver) HookCreated(string, string, time.Duration) {}
func (o *soakObserver) StreamChunk(string, engine.ChunkSpan)      {}
func (o *soakObserver) RunFinished(run string, _ time.Duration, _ bool) {
	if ch, ok := o.done.LoadAndDelete(run); ok {
		close(ch.(chan struct{}))
	}
}

func soakEngine(b *testing.B, f engine.Features, warmup, d time.Duration) soakResult {
	ctx := context.Background()
	w, err := natsworld.New(ctx, natsworld.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	obs := &soakObserver{}
	e, err := engine.New(engine.Config{World: w, Features: f, Observer: obs, Concurrency: fanout.Concurrency})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Stop(ctx) }()
	p := engine.FanOut(soakBranches)
	r := closedLoop(b, warmup, d, func(id string) error {
		ch := make(chan struct{})
		obs.done.Store(id, ch)
		if err := e.StartRun(ctx, id, p); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		case <-time.After(fanout.RunTimeout):
			return fmt.Errorf("engine run %s lost: not finished within %v (world incidents: %s)", id, fanout.RunTimeout, w.Incidents())
		}
	})
	if inc := w.Incidents(); inc.Total() > 0 {
		b.Errorf("world incidents during the soak: %s (last: %s)", inc, inc.Last)
	}
	return r
}

func soakFloor(b *testing.B, f engine.Features, d time.Duration) soakResult {
	ctx := context.Background()
	w, err := rawjs.New(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	input, _ := json.Marshal(engine.FanOut(soakBranches)) // the engine stores its program as run input
	fl := fanout.NewFloor(w, f, soakBranches, len(input))
	if err := fl.Start(ctx, fanout.Concurrency); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fl.Stop(ctx) }()
	return closedLoop(b, soakWarmup, d, func(id string) error {
		_, err := fl.Run(ctx, id, fanout.RunTimeout)
		return err
	})
}
