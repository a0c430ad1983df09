package sweep

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// slowdownProfile gives every world op a fixed latency (the cloud
// profile's medians) and nothing else: no capacity pools and no per-event
// cost of a log load. With those, one op made slower can make another
// path truly faster — its calls no longer compete for a pool with the
// slowed ones, or it loads a log the slowed writes have not reached yet —
// and a metric that shows it is right to. Without them a delay can only
// hold back what waits for it, so only the definitions are on trial.
const slowdownProfile = `name: fixed
description: the cloud profile's median latencies, fixed; no pools, no per-event cost
ops:
  default: {latency: 25ms}
  run_create: {latency: 30ms}
  run_get: {latency: 15ms}
  hook_lookup: {latency: 15ms}
  run_list: {latency: 40ms}
  log_load: {latency: 20ms}
  publish: {latency: 20ms}
  deliver: {latency: 30ms}
  stream_write: {latency: 15ms}
  stream_read: {latency: 15ms}
  stream_close: {latency: 20ms}
`

// slowdownCell is one cell's per-run values: for each metric its scenario
// declares, one value per run (the metric's per-run statistic,
// metrics.TestedOn).
type slowdownCell struct {
	name   string
	perRun map[string][]int64
}

// slowdownCells runs fan-outs of 4 and 20 branches (at 4 the branches
// leave gaps, where a definition that sums or unites every branch's time
// shows), a sequence of 10 steps, a race of 8, three streams (40 paced
// chunks, a 30-chunk pipeline, the bursty cadence replayed) and a hook
// resume, 3 runs each, for every default version, on the sim world under
// slowdownProfile (file) with faults applied. Each cell runs as a sweep
// runs it (plan, fresh world, profile, driver) and its timelines become
// metrics as a results file's do, without the histograms and files.
func slowdownCells(t *testing.T, file, faults string) []slowdownCell {
	t.Helper()
	p := DefaultPlan()
	p.Scenarios = []ScenarioPlan{
		{Name: "fanout", Options: map[string][]string{"branches": {"4", "20"}}},
		{Name: "sequential", Options: map[string][]string{"steps": {"10"}}},
		{Name: "race", Options: map[string][]string{"branches": {"8"}}},
		{Name: "stream-overhead", Options: map[string][]string{"chunks": {"40"}}},
		{Name: "stream-pipeline", Options: map[string][]string{"chunks": {"30"}, "size": {"1KB"}}},
		{Name: "stream-replay", Options: map[string][]string{"cadence": {"bursty"}}},
		{Name: "hook-step"},
	}
	p.Worlds = []string{"sim"}
	p.Profiles = []string{file}
	p.Faults = faults
	p.Versions = engine.DefaultVersions()
	p.Switches = []engine.SwitchSet{{}}
	p.Reps, p.Warmup = 3, 0
	p.CellTimeout = 10 * time.Minute // virtual
	p.Seed = 7
	cells, err := p.Cells()
	if err != nil {
		t.Fatal(err)
	}
	var out []slowdownCell
	r := &sweepRun{plan: p, prog: NoProgress{}}
	for _, c := range cells {
		w, err := r.newWorld(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		var res *driver.Result
		var derr error
		err = w.run(context.Background(), func(ctx context.Context) {
			res, derr = driver.Run(ctx, r.driverConfig(c, w, c.Hash))
		})
		w.close()
		if err = cmp.Or(err, derr); err != nil {
			t.Fatalf("%s: %v", c.Label(), err)
		}
		col := metrics.Collect(res.Timelines, c.Metrics)
		if len(col.Failed) > 0 || len(col.Stalls) > 0 || len(res.Timelines) != p.Reps {
			t.Fatalf("%s under %q: %d runs, %d failed, %d stalls", c.Label(), faults, len(res.Timelines), len(col.Failed), len(col.Stalls))
		}
		sc := slowdownCell{name: c.Label(), perRun: map[string][]int64{}}
		for _, name := range c.Scenario.Metrics {
			if s := col.Samples[name]; s != nil {
				sc.perRun[name] = s.PerRun(metrics.TestedOn(name))
			}
		}
		out = append(out, sc)
	}
	return out
}

// TestNoMetricReadsASlowdownAsAGain: 10 ms more on any one world op makes
// no metric whose lower is better (metrics.Lower) lower, in any run. The
// sim world replays a seed exactly, so the runs of the two sweeps pair up
// and the check is exact: each run's value (its per-run aggregate, for a
// metric with several samples per run) is at least the base run's.
// Informational metrics are only logged: they can fall, which is why they
// are not judged.
func TestNoMetricReadsASlowdownAsAGain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every world op slower on the sim world")
	}
	const extra = 10 * time.Millisecond
	file := filepath.Join(t.TempDir(), "fixed.yaml")
	if err := os.WriteFile(file, []byte(slowdownProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	base := slowdownCells(t, file, "")
	moved := map[world.Op]bool{}
	for _, op := range world.Ops() {
		lat, ok := prof.For(op).Latency.(profile.Fixed)
		if !ok {
			t.Fatalf("%s: latency %v is not fixed", op, prof.For(op).Latency)
		}
		slow := slowdownCells(t, file, fmt.Sprintf("%s.latency=fixed:%s", op, time.Duration(lat)+extra))
		for i, b := range base {
			h := slow[i]
			for _, name := range slices.Sorted(maps.Keys(b.perRun)) {
				bv, hv := b.perRun[name], h.perRun[name]
				if len(bv) != len(hv) {
					t.Errorf("%s +%v, %s: %s has %d runs, base %d", op, extra, b.name, name, len(hv), len(bv))
					continue
				}
				var lower []string
				for r := range bv {
					if hv[r] != bv[r] {
						moved[op] = true
					}
					if hv[r] < bv[r] {
						lower = append(lower, fmt.Sprintf("run %d %dµs → %dµs", r, bv[r], hv[r]))
					}
				}
				if len(lower) == 0 {
					continue
				}
				if metrics.BetterOf(name) == metrics.Informational {
					t.Logf("%s +%v, %s: informational %s fell: %s", op, extra, b.name, name, strings.Join(lower, ", "))
					continue
				}
				t.Errorf("%s +%v, %s: %s fell, a slowdown read as a gain: %s", op, extra, b.name, name, strings.Join(lower, ", "))
			}
		}
	}
	// The overrides took effect: every op these programs call moved
	// something.
	for _, op := range []world.Op{world.OpCreateRun, world.OpGetRun, world.OpLoad, world.OpPublish, world.OpDeliver,
		world.AppendOp(world.StepCreated), world.AppendOp(world.StepStarted), world.AppendOp(world.StepCompleted),
		world.AppendOp(world.RunCompleted), world.OpWriteChunk, world.OpReadChunks} {
		if !moved[op] {
			t.Errorf("%s +%v moved no metric: the override did not reach the world", op, extra)
		}
	}
}
