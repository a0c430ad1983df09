package driver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/sim"
)

var hookProgram = engine.Program{Stages: []engine.Stage{{Kind: engine.StageHook}, {Kind: engine.StageSteps, Steps: 1}}}

// hookBench is an engine on w observed by a HookResumer.
type hookBench struct {
	w     world.World
	rt    world.Runtime
	rec   *metrics.Recorder
	hooks *HookResumer
	eng   *engine.Engine
}

func newHookBench(t *testing.T, w world.World, f engine.Features) *hookBench {
	t.Helper()
	b := &hookBench{w: w, rt: w.Runtime(), rec: metrics.NewRecorder()}
	b.hooks = NewHookResumer(b.rec, b.rt)
	eng, err := engine.New(engine.Config{World: w, Features: f, Observer: b.hooks})
	if err != nil {
		t.Fatal(err)
	}
	b.eng = eng
	return b
}

// runAll starts n hook runs and waits (on the runtime) until every one
// finished; it returns their timelines.
func (b *hookBench) runAll(ctx context.Context, t *testing.T, n int) []metrics.RunTimeline {
	done := make([]world.Future, n)
	for i := range done {
		id := fmt.Sprintf("hk%02d", i)
		done[i] = b.rt.NewFuture()
		if err := b.rec.Begin(id, b.rt.Now(), 1, done[i].Resolve); err != nil {
			t.Fatal(err)
		}
		if err := b.eng.StartRun(ctx, id, hookProgram); err != nil {
			t.Fatal(err)
		}
	}
	var out []metrics.RunTimeline
	for i, f := range done {
		if !f.Wait(ctx, time.Minute) {
			t.Fatalf("run %d did not finish", i)
		}
		tl, _ := b.rec.Snapshot(fmt.Sprintf("hk%02d", i), b.rt.Now())
		out = append(out, tl)
	}
	return out
}

func TestHookResumerResumesEachHookOnce(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) {
			w := mem.New(world.Options{})
			defer w.Close()
			f := version(t, "resilient-inband")
			f.LazyHookResume = lazy
			b := newHookBench(t, w, f)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.hooks.Bind(ctx, b.eng)
			if err := b.eng.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer b.eng.Stop(context.Background())
			const n = 5
			for _, tl := range b.runAll(ctx, t, n) {
				if tl.Failed || len(tl.Hooks) != 1 || !tl.Hooks[0].WasResumed || len(tl.Steps) != 1 {
					t.Fatalf("run %s: failed %v hooks %+v steps %d", tl.ID, tl.Failed, tl.Hooks, len(tl.Steps))
				}
				h := tl.Hooks[0]
				if h.Resumed < h.Created || tl.Steps[0].Start < h.Resumed {
					t.Errorf("run %s: created %v resumed %v step %v", tl.ID, h.Created, h.Resumed, tl.Steps[0].Start)
				}
				if len(metrics.ResumeLatencies(&tl)) != 1 {
					t.Errorf("run %s: no resume_to_step", tl.ID)
				}
			}
			// A run can finish before its resume task counts the resume
			// (lazy: the consumer may run ahead of the producer's write).
			s := b.hooks.Stats()
			for deadline := b.rt.Now() + 10*time.Second; s.Resumed < n && b.rt.Now() < deadline; s = b.hooks.Stats() {
				_ = b.rt.Sleep(ctx, time.Millisecond)
			}
			if s.Resumed != n || s.Failed != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestHookResumerBindsLate: a hook reported before Bind is resumed once the
// engine is bound.
func TestHookResumerBindsLate(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	b := newHookBench(t, w, version(t, "runcontext"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.eng.Stop(context.Background())
	done := b.rt.NewFuture()
	if err := b.rec.Begin("late", 0, 1, done.Resolve); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.StartRun(ctx, "late", hookProgram); err != nil {
		t.Fatal(err)
	}
	for deadline := b.rt.Now() + 10*time.Second; ; {
		tl, _ := b.rec.Snapshot("late", b.rt.Now())
		if len(tl.Hooks) == 1 {
			break
		}
		if b.rt.Now() > deadline {
			t.Fatal("hook never created")
		}
		_ = b.rt.Sleep(ctx, time.Millisecond)
	}
	if done.Done() {
		t.Fatal("run finished before its hook was resumed")
	}
	b.hooks.Bind(ctx, b.eng)
	if !done.Wait(ctx, 10*time.Second) {
		t.Fatal("run did not finish after Bind")
	}
}

// TestHookResumerRetriesWithOneResumeID: on sim, with a third of the
// hook_received writes and a tenth of the publishes failing transiently,
// the resumer retries with the same resume id: every run completes and its
// log holds exactly one hook_received.
func TestHookResumerRetriesWithOneResumeID(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) {
			sw := sim.New(sim.Config{Seed: 21})
			defer sw.Close()
			p, _ := profile.Load("none")
			p, err := profile.ApplyOverrides(p, "hook_received.transient=30%,publish.transient=10%")
			if err != nil {
				t.Fatal(err)
			}
			w := profile.Wrap(sw, p, 21)
			f := version(t, "resilient-inband")
			f.LazyHookResume = lazy
			b := newHookBench(t, w, f)
			const n = 20
			err = sw.Run(context.Background(), func(ctx context.Context) {
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				b.hooks.Bind(ctx, b.eng)
				if err := b.eng.Start(ctx); err != nil {
					t.Error(err)
					return
				}
				defer b.eng.Stop(ctx)
				// Start runs on the inner world: the faults are for the resume.
				starter, err := engine.New(engine.Config{World: sw, Features: f})
				if err != nil {
					t.Error(err)
					return
				}
				done := make([]world.Future, n)
				for i := range done {
					id := fmt.Sprintf("hk%02d", i)
					done[i] = b.rt.NewFuture()
					_ = b.rec.Begin(id, b.rt.Now(), 1, done[i].Resolve)
					if err := starter.StartRun(ctx, id, hookProgram); err != nil {
						t.Error(err)
						return
					}
				}
				for i, fu := range done {
					id := fmt.Sprintf("hk%02d", i)
					if !fu.Wait(ctx, time.Hour) {
						t.Errorf("run %s did not finish", id)
						continue
					}
					tl, _ := b.rec.Snapshot(id, b.rt.Now())
					events, err := sw.Load(ctx, id)
					if err != nil {
						t.Error(err)
						continue
					}
					received := 0
					for _, ev := range events {
						if ev.Kind == world.HookReceived {
							received++
						}
					}
					if tl.Failed || received != 1 {
						t.Errorf("run %s: failed %v (%s), %d hook_received", id, tl.Failed, tl.Error, received)
					}
				}
				// Let resume tasks that ran behind their run's end return
				// (virtual time: free).
				_ = b.rt.Sleep(ctx, time.Minute)
			})
			if err != nil {
				t.Fatal(err)
			}
			s := b.hooks.Stats()
			if s.Resumed != n || s.Failed != 0 || s.Retries == 0 {
				t.Errorf("stats %+v: want %d resumed, none failed, some retries", s, n)
			}
			t.Logf("lazy=%v: %+v", lazy, s)
		})
	}
}

// TestHookResumerFailsRunOnPermanentError: a resume the world rejects for
// good (an unknown token) marks the run failed instead of leaving it to
// stall.
func TestHookResumerFailsRunOnPermanentError(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	b := newHookBench(t, w, version(t, "runcontext"))
	ctx := context.Background()
	b.hooks.Bind(ctx, b.eng)
	done := b.rt.NewFuture()
	if err := b.rec.Begin("ghost", 0, 1, done.Resolve); err != nil {
		t.Fatal(err)
	}
	b.hooks.HookCreated("ghost", "ghost/h0", b.rt.Now())
	if !done.Wait(ctx, 10*time.Second) {
		t.Fatal("run not marked failed")
	}
	tl, _ := b.rec.Snapshot("ghost", b.rt.Now())
	if !tl.Failed || !strings.Contains(tl.Error, "resume hook ghost/h0") {
		t.Errorf("timeline failed %v error %q", tl.Failed, tl.Error)
	}
	if s := b.hooks.Stats(); s.Failed != 1 || s.Resumed != 0 {
		t.Errorf("stats %+v", s)
	}
}
