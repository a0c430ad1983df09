package scenarios_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/sim"
)

// cellWorld is a world for one cell and the way to run code on it: sim runs
// the driver inside its scheduler, mem calls it directly.
type cellWorld struct {
	world.World
	sim *sim.World // nil on mem
}

func (w cellWorld) run(ctx context.Context, fn func(ctx context.Context)) error {
	if w.sim != nil {
		return w.sim.Run(ctx, fn)
	}
	fn(ctx)
	return nil
}

// newWorld builds kind ("mem" or "sim") wrapped by profile name with the
// fault overrides faults ("" for none).
func newWorld(t *testing.T, kind, prof, faults string, seed int64) cellWorld {
	t.Helper()
	var cw cellWorld
	switch kind {
	case "mem":
		cw.World = mem.New(world.Options{Seed: seed})
	case "sim":
		cw.sim = sim.New(sim.Config{Options: world.Options{Seed: seed}, Seed: seed})
		cw.World = cw.sim
	default:
		t.Fatalf("unknown world %s", kind)
	}
	p, err := profile.Load(prof)
	if err != nil {
		t.Fatal(err)
	}
	if faults != "" {
		if p, err = profile.ApplyOverrides(p, faults); err != nil {
			t.Fatal(err)
		}
	}
	cw.World = profile.Wrap(cw.World, p, seed)
	t.Cleanup(func() { cw.Close() })
	return cw
}

// cell is one driven cell: its summary and the driver's result.
type cell struct {
	results.Cell
	res *driver.Result
}

// runCell runs scenario name with opts on w as version v under switches,
// and summarises it the way a sweep does.
func runCell(t *testing.T, w cellWorld, name string, opts scenarios.Values, v engine.Version, switches string, reps int) cell {
	return runCellErrs(t, w, name, opts, v, switches, reps, false)
}

// runCellErrs is runCell; with tolerateErrors, failed runs do not fail the
// test (the caller checks them).
func runCellErrs(t *testing.T, w cellWorld, name string, opts scenarios.Values, v engine.Version, switches string, reps int, tolerateErrors bool) cell {
	t.Helper()
	s, err := scenarios.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	prog, full, err := s.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := engine.ParseSwitchSet(switches)
	if err != nil {
		t.Fatal(err)
	}
	cfg := driver.Config{World: w, Features: sw.Apply(v.Features), Program: prog,
		RunPrefix: name, Reps: reps, Pacer: driver.Closed{Concurrency: 1},
		CellTimeout: time.Hour, Seed: 1}
	if w.sim == nil {
		cfg.CellTimeout = 30 * time.Second
	}
	var res *driver.Result
	var derr error
	if err := w.run(context.Background(), func(ctx context.Context) { res, derr = driver.Run(ctx, cfg) }); err != nil {
		t.Fatalf("%s on %s: %v", name, w.Name(), err)
	}
	if derr != nil {
		t.Fatalf("%s on %s: %v", name, w.Name(), derr)
	}
	id := results.Cell{Scenario: name, Version: v.Name, Switches: sw.List(), World: w.Name(), Steps: full.Int("steps")}
	c := cell{res.Summarize(id, metrics.Config{ChunkInterval: scenarios.ChunkInterval(prog), Stream: scenarios.Stream(prog), Races: metrics.Races(prog)}, false), res}
	if len(res.Timelines) != reps || res.TimedOut {
		t.Fatalf("%s on %s (%s): %d of %d runs, timed out %v", name, w.Name(), v.Name, len(res.Timelines), reps, res.TimedOut)
	}
	if !tolerateErrors && c.Errors > 0 {
		t.Fatalf("%s on %s (%s): %d errors %v", name, w.Name(), v.Name, c.Errors, c.FailedRuns)
	}
	return c
}

// TestBookRunsEverywhere runs every scenario of the book on mem and sim for
// every built-in version and checks that each produces the metrics it
// declares. On mem, where time is real, the stream scenarios are shortened.
func TestBookRunsEverywhere(t *testing.T) {
	type book struct {
		name    string
		opts    scenarios.Values
		memOpts scenarios.Values // mem only, when different
	}
	books := []book{
		{"step", nil, nil},
		{"hook-step", nil, nil},
		{"sequential", scenarios.Values{"steps": "120"}, nil}, // past the inline budget of 100: one queue hop
		{"stream-latency", nil, scenarios.Values{"chunks": "10", "interval": "1ms"}},
		{"stream-overhead", nil, scenarios.Values{"chunks": "30", "interval": "1ms"}},
		{"stream-overhead", scenarios.Values{"shape": "structured"}, scenarios.Values{"shape": "structured", "chunks": "30", "interval": "1ms"}},
		{"race", nil, nil},
		{"payload", nil, nil},
		{"payload", scenarios.Values{"shape": "fanout", "size": "1MB"}, scenarios.Values{"shape": "fanout", "size": "1MB", "steps": "3"}},
		{"stream-replay", scenarios.Values{"cadence": "bursty"}, scenarios.Values{"speed": "8"}},
		{"stream-sizes", nil, scenarios.Values{"chunks": "30", "interval": "1ms"}},
		{"stream-pipeline", nil, nil},
	}
	for _, kind := range []string{"mem", "sim"} {
		for _, v := range engine.Versions() {
			for _, b := range books {
				opts := b.opts
				if kind == "mem" && b.memOpts != nil {
					opts = b.memOpts
				}
				t.Run(fmt.Sprintf("%s/%s/%s%v", kind, v.Name, b.name, opts), func(t *testing.T) {
					w := newWorld(t, kind, "none", "", 7)
					c := runCell(t, w, b.name, opts, v, "", 2)
					s, _ := scenarios.Get(b.name)
					for _, m := range s.Metrics {
						if b.name == "payload" && b.opts["shape"] == "fanout" && m == metrics.STSO {
							continue // one stage: no stage transition
						}
						if c.Metrics[m].Count == 0 {
							t.Errorf("declared metric %s has no samples (have %v)", m, keys(c.Metrics))
						}
					}
					if b.name == "sequential" {
						if c.STSOSlopeUS == nil {
							t.Error("no STSO slope")
						}
						if c.Metrics[metrics.STSOQueue].Count != 2 { // one hop per run
							t.Errorf("queue-hop STSO samples %d, want 2", c.Metrics[metrics.STSOQueue].Count)
						}
					}
				})
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// TestSequentialSTSOSplitFixedDeliver: with every queue delivery taking a
// fixed 10 ms, a gap reached through the queue is at least 10 ms and an
// inline gap, which never crosses the queue, is not. On sim the bound is
// exact; on mem (real time) only the lower bound is checked, since an inline
// gap on a loaded machine may take any time.
func TestSequentialSTSOSplitFixedDeliver(t *testing.T) {
	v, _ := engine.LookupVersion("resilient-inband")
	for _, kind := range []string{"sim", "mem"} {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t, kind, "none", "deliver.latency=fixed:10ms", 3)
			steps := "1020"
			if kind == "mem" {
				steps = "250"
			}
			c := runCell(t, w, "sequential", scenarios.Values{"steps": steps}, v, "", 1)
			q, in := c.Metrics[metrics.STSOQueue], c.Metrics[metrics.STSOInline]
			if q.Count == 0 || in.Count == 0 {
				t.Fatalf("queue-hop %d and inline %d samples", q.Count, in.Count)
			}
			if q.Min < 10_000 {
				t.Errorf("queue-hop STSO min %d µs < 10 ms", q.Min)
			}
			if kind == "sim" && in.Max >= 10_000 {
				t.Errorf("inline STSO max %d µs >= 10 ms", in.Max)
			}
			if c.Metrics[metrics.WO].Count != 1 {
				t.Errorf("WO samples %d", c.Metrics[metrics.WO].Count)
			}
			t.Logf("%s steps=%s: stso_queue n=%d min=%dµs p50=%dµs; stso_inline n=%d p50=%dµs max=%dµs; WO %dµs",
				kind, steps, q.Count, q.Min, q.P50, in.Count, in.P50, in.Max, c.Metrics[metrics.WO].Max)
		})
	}
}

// TestSequentialSTSOSlope: 1020 sequential steps on sim. When loading the
// log costs 100 µs per event, every step's replay loads a longer log, so
// STSO grows with the step index; with no per-event cost it does not.
func TestSequentialSTSOSlope(t *testing.T) {
	v, _ := engine.LookupVersion("resilient-inband")
	for _, tc := range []struct {
		faults string
		check  func(slope float64) bool
		want   string
	}{
		{"log_load.per_event=100us", func(s float64) bool { return s > 100 }, "> 100 µs/step"},
		{"", func(s float64) bool { return math.Abs(s) < 1 }, "|slope| < 1 µs/step"},
	} {
		t.Run("faults="+tc.faults, func(t *testing.T) {
			w := newWorld(t, "sim", "none", tc.faults, 5)
			c := runCell(t, w, "sequential", scenarios.Values{"steps": "1020"}, v, "", 1)
			if c.STSOSlopeUS == nil {
				t.Fatal("no slope")
			}
			if !tc.check(*c.STSOSlopeUS) {
				t.Errorf("STSO slope %.4f µs/step, want %s", *c.STSOSlopeUS, tc.want)
			}
			t.Logf("STSO slope %.4f µs/step; stso p50 %d µs, WO %d µs", *c.STSOSlopeUS,
				c.Metrics[metrics.STSO].P50, c.Metrics[metrics.WO].Max)
		})
	}
}

// TestLazyHookResumeCloud: under the cloud profile on sim, lazy hook resume
// (hook_received write ∥ publish) gives a lower hook-step TTFS than the kill
// switch lazy-hook-resume=0 (write, then publish).
func TestLazyHookResumeCloud(t *testing.T) {
	v, _ := engine.LookupVersion("resilient-inband")
	const reps = 30
	median := map[string]int64{}
	for _, sw := range []string{"none", "lazy-hook-resume=0"} {
		w := newWorld(t, "sim", "cloud", "", 11)
		c := runCell(t, w, "hook-step", nil, v, sw, reps)
		m := c.Metrics[metrics.TTFS]
		if m.Count != reps || c.Metrics[metrics.ResumeToStep].Count != reps {
			t.Fatalf("%s: ttfs %d resume_to_step %d samples, want %d", sw, m.Count, c.Metrics[metrics.ResumeToStep].Count, reps)
		}
		median[sw] = m.P50
		t.Logf("hook-step cloud/sim %s: TTFS p50 %.1f ms p90 %.1f ms; resume→step p50 %.1f ms",
			sw, float64(m.P50)/1e3, float64(m.P90)/1e3, float64(c.Metrics[metrics.ResumeToStep].P50)/1e3)
	}
	if median["none"] >= median["lazy-hook-resume=0"] {
		t.Errorf("lazy TTFS p50 %d µs not below the kill switch's %d µs", median["none"], median["lazy-hook-resume=0"])
	}
}

// TestHookDedupUnderFaults: with transient hook_received and publish
// failures injected, the driver retries the resume with the same resume id
// and the run's log holds exactly one hook_received: the payload is
// delivered once, and every run that reached its hook completes. (An
// injected publish failure can also fail a run's start, which the driver
// counts as an error; such a run never reaches its hook.)
func TestHookDedupUnderFaults(t *testing.T) {
	v, _ := engine.LookupVersion("resilient-inband")
	const reps = 20
	for _, sw := range []string{"none", "lazy-hook-resume=0"} {
		t.Run(sw, func(t *testing.T) {
			w := newWorld(t, "sim", "none", "hook_received.transient=30%,publish.transient=10%", 13)
			c := runCellErrs(t, w, "hook-step", nil, v, sw, reps, true)
			hooked := 0
			err := w.run(context.Background(), func(ctx context.Context) {
				for _, tl := range c.res.Timelines {
					if len(tl.Hooks) == 0 {
						if !tl.Failed {
							t.Errorf("run %s never reached its hook and did not fail", tl.ID)
						}
						continue // its start failed
					}
					hooked++
					if !tl.Finished || tl.Failed {
						t.Errorf("run %s: finished %v failed %v (%s)", tl.ID, tl.Finished, tl.Failed, tl.Error)
					}
					events, err := w.sim.Load(ctx, tl.ID)
					if err != nil {
						t.Errorf("load %s: %v", tl.ID, err)
						continue
					}
					n, done := 0, false
					for _, ev := range events {
						n += btoi(ev.Kind == world.HookReceived)
						done = done || ev.Kind == world.RunCompleted
					}
					if n != 1 || !done {
						t.Errorf("run %s: %d hook_received, completed %v", tl.ID, n, done)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if hooked < reps/2 {
				t.Errorf("only %d of %d runs reached their hook", hooked, reps)
			}
			if got := c.Metrics[metrics.ResumeToStep].Count; got != hooked {
				t.Errorf("resume_to_step samples %d, want %d", got, hooked)
			}
			t.Logf("%s: %d of %d runs reached their hook, each received it once; %d start failures", sw, hooked, reps, c.Errors)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStreamOverheadShapes: the stream-overhead defaults on sim are the
// reference's (300 deltas at 100/s), every delta is read, and both shapes
// report SO.
func TestStreamOverheadShapes(t *testing.T) {
	v, _ := engine.LookupVersion("runcontext")
	for _, shape := range []string{"text", "structured"} {
		w := newWorld(t, "sim", "cloud", "", 17)
		c := runCell(t, w, "stream-overhead", scenarios.Values{"shape": shape}, v, "", 2)
		if n := c.Metrics[metrics.SL].Count; n != 2*300 {
			t.Errorf("%s: %d chunks read, want 600", shape, n)
		}
		if c.Metrics[metrics.SO].Count != 2 {
			t.Errorf("%s: SO samples %d", shape, c.Metrics[metrics.SO].Count)
		}
		t.Logf("stream-overhead shape=%s cloud/sim: SO p50 %.1f ms, SL p50 %.1f ms p99 %.1f ms", shape,
			float64(c.Metrics[metrics.SO].P50)/1e3, float64(c.Metrics[metrics.SL].P50)/1e3, float64(c.Metrics[metrics.SL].P99)/1e3)
	}
}
