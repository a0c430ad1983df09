package calibrate

import (
	"context"
	"math"
	"testing"

	"github.com/durabench/durabench/world/profile"
)

// truth is the known profile of TestFitRecoversAKnownProfile: a backend
// with a read pool, each latency lognormal with p99 = 3 × median.
const truth = `name: truth
ops:
  default: {latency: {dist: lognormal, median: 20ms, p99: 60ms}}
  run_get: {latency: {dist: lognormal, median: 9ms, p99: 27ms}}
  log_load: {latency: {dist: lognormal, median: 12ms, p99: 36ms}, per_event: 250us}
  publish: {latency: {dist: lognormal, median: 6ms, p99: 18ms}}
  deliver: {latency: {dist: lognormal, median: 15ms, p99: 45ms}}
groups:
  reads: {ops: [run_get, log_load], capacity: 8}
`

// start is where the search begins: every parameter of truth off by a
// factor 1.5–1.8 one way or the other.
const start = `name: start
ops:
  default: {latency: {dist: lognormal, median: 32ms, p99: 96ms}}
  run_get: {latency: {dist: lognormal, median: 5ms, p99: 15ms}}
  log_load: {latency: {dist: lognormal, median: 20ms, p99: 60ms}, per_event: 150us}
  publish: {latency: {dist: lognormal, median: 10ms, p99: 30ms}}
  deliver: {latency: {dist: lognormal, median: 9ms, p99: 27ms}}
groups:
  reads: {ops: [run_get, log_load], capacity: 12}
`

// observed is the shape of the generated table: which figures of which
// cells; the values come from measuring truth.
const observed = `profile: truth
reps: 12
warmup: 1
cells:
  - version: resilient-inband
    branches: 1
    reps: 40
    metrics:
      ttfs: {p50: 1s}
      op.step_started: {p50: 1s}
      op.run_get: {p50: 1s}
      op.publish: {p50: 1s}
      op.deliver: {p50: 1s}
      op.log_load: {p50: 1s}
  - scenario: sequential
    options: {steps: 100}
    version: resilient-inband
    metrics:
      ttls: {p50: 1s}
      op.log_load: {p50: 1s, p90: 1s}
  - version: baseline-serial
    branches: 32
    metrics:
      ttls: {p50: 1s}
      dispatch.publish: {p50: 1s}
  - version: resilient-inband
    branches: 96
    metrics:
      ttls: {p50: 1s}
      op.run_get: {p90: 1s}
`

// TestFitRecoversAKnownProfile: a table generated from a known profile is
// fitted back, from a start off by 1.5–1.8× on every parameter, to
// parameters within 15% of the truth (a capacity of 8 within one permit)
// and figures within 5% of the table. Each parameter has a figure that
// tells it apart: a lone call's latency (op.*), the log loads of a growing
// sequence (per-event cost), the dispatch of a serial publish loop, and the
// run reads queued behind a burst's loads (the read pool).
func TestFitRecoversAKnownProfile(t *testing.T) {
	ctx := context.Background()
	want, err := profile.Parse("truth.yaml", []byte(truth))
	if err != nil {
		t.Fatal(err)
	}
	base, err := profile.Parse("start.yaml", []byte(start))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Parse("observed.yaml", []byte(observed))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := Check(ctx, tab, want, "truth", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tab.Cells {
		for j := range tab.Cells[i].Figures {
			tab.Cells[i].Figures[j].Value = gen.Fitted[i][j]
		}
	}
	res, err := Fit(ctx, tab, Config{Base: base, Seed: 1, MaxEvals: 60, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d profiles measured", res.Evals)
	for _, p := range res.Params {
		truth := p.get(want)
		off := p.Fitted/truth - 1
		t.Logf("%-20s truth %8s start %8s fitted %8s (%+.1f%%)", p.Name, p.Format(truth), p.Format(p.Start), p.Format(p.Fitted), 100*off)
		if math.Abs(off) > 0.15 {
			t.Errorf("%s: fitted %s, truth %s: %+.1f%%, want within 15%%", p.Name, p.Format(p.Fitted), p.Format(truth), 100*off)
		}
	}
	if len(res.Frozen) > 0 {
		t.Errorf("parameters the table should inform were not searched: %v", res.Frozen)
	}
	for i, c := range tab.Cells {
		for j, f := range c.Figures {
			if e := RelError(f, res.Fitted[i][j]); math.Abs(e) > 0.05 {
				t.Errorf("%s %s: observed %s, fitted %s (%+.1f%%), want within 5%%", c.Label(), f.Name(), f.Format(f.Value), f.Format(res.Fitted[i][j]), 100*e)
			}
		}
	}
}
