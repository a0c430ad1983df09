package reporters

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// metricOf summarises values (µs) as a sweep does.
func metricOf(values []int64) results.Metric { return results.NewMetric(values, 0) }

// perRunOf is a metric with several samples per run: values split evenly
// into runs, each run's aggregate kept as a sweep keeps it (per_run).
func perRunOf(name string, values []int64, runs int) results.Metric {
	m := results.NewMetric(values, 0)
	var s metrics.Samples
	s.Values = values
	for i := 1; i <= runs; i++ {
		s.RunEnds = append(s.RunEnds, i*len(values)/runs)
	}
	stat := metrics.TestedOn(name)
	m.PerRun, m.PerRunStat = s.PerRun(stat), string(stat)
	return m
}

// lognormal draws n values around median µs with spread sigma.
func lognormal(r *rand.Rand, n int, median, sigma float64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(median * math.Exp(sigma*r.NormFloat64()))
	}
	return out
}

// fixtureOpts shape a synthetic sweep: speed scales every latency of a
// version (1 = as the fixture's head), commit and start name it.
type fixtureOpts struct {
	commit string
	start  time.Time
	seed   uint64
	speed  map[string]float64
	stall  bool // one resilient run at 256 branches stalls for ~306 s
}

// fixture builds a deterministic results file: a fan-out sweep over 20, 64
// and 256 branches for three versions (baseline shows the O(N²) cliff,
// pending-count removes it) and a 50-step sequence for two versions.
func fixture(o fixtureOpts) *results.File {
	r := rand.New(rand.NewPCG(o.seed, 7))
	versions := []string{"baseline", "resilient", "pending-count"}
	f := &results.File{
		Schema:           results.Schema,
		Methodology:      results.Methodology,
		DurabenchVersion: "v0.1.0",
		GitCommit:        o.commit,
		StartedAt:        o.start,
		FinishedAt:       o.start.Add(90 * time.Second),
		Host:             results.Host{CPUs: 2, OS: "linux", Arch: "amd64", Go: "go1.26.8"},
		Plan: results.PlanRecord{
			Scenarios: []string{"fanout", "sequential"},
			Branches:  []int{20, 64, 256},
			Switches:  []string{"none"},
			Worlds:    []string{"mem"},
			Profiles:  []string{"none"},
			Reps:      10, Warmup: 2, Pace: "burst", CellTimeoutMS: 600_000, Seed: 1,
			WorldOptions: results.WorldOptions{RetryStyle: "redeliver", VisibilityTimeoutMS: 300_000},
		},
	}
	for _, v := range versions {
		f.Plan.Versions = append(f.Plan.Versions, results.VersionSpec{Name: v, Features: map[string]any{}})
	}
	speed := func(v string) float64 {
		if s, ok := o.speed[v]; ok {
			return s
		}
		return 1
	}
	const reps = 10
	for _, b := range []int{20, 64, 256} {
		for _, v := range versions {
			// Per-branch cost grows with the log for every version but
			// pending-count, whose completers skip the log load.
			perBranch := map[string]float64{"baseline": 40, "resilient": 28, "pending-count": 9}[v]
			growth := map[string]float64{"baseline": 0.9, "resilient": 0.6, "pending-count": 0}[v]
			ttls := (2000 + perBranch*float64(b) + growth*float64(b*b)) * speed(v)
			c := results.Cell{Scenario: "fanout", Branches: b, Version: v, Switches: []string{}, World: "mem", Profile: "none", Runs: reps}
			ttlsV := lognormal(r, reps, ttls, 0.12)
			ttfsV := lognormal(r, reps, 900*speed(v)+float64(b)*3, 0.2)
			skewV := lognormal(r, reps, ttls*0.6, 0.15)
			var offsets []int64
			for range b {
				offsets = append(offsets, int64(r.Float64()*ttls*0.6))
			}
			if o.stall && v == "resilient" && b == 256 {
				ttlsV[3] = 306_200_000
				c.Stalls = 1
				c.StalledRuns = []results.StalledRun{{Run: "fanout-256-resilient-r04", TTLSMS: 306_200, Finished: true}}
			}
			if v == "baseline" && b == 64 {
				c.Errors = 1
				c.FailedRuns = []results.FailedRun{{Run: "fanout-64-baseline-r07", Error: "step s12: claim rejected: step not found (412)\nafter 3 attempts"}}
			}
			c.Metrics = map[string]results.Metric{
				"ttls":        metricOf(ttlsV),
				"ttfs":        metricOf(ttfsV),
				"skew":        perRunOf("skew", skewV, reps),
				"skew_offset": perRunOf("skew_offset", offsets, reps),
				"ttc":         metricOf(addEach(ttlsV, 400)),
			}
			c.CriticalPath = pathOf(ttlsV, b, v, o.stall && v == "resilient" && b == 256)
			c.ElapsedMS = float64(sum(ttlsV)) / 1000
			f.Cells = append(f.Cells, c)
		}
	}
	for _, v := range []string{"baseline", "pending-count"} {
		c := results.Cell{Scenario: "sequential", Steps: 50, Version: v, Switches: []string{}, World: "mem", Profile: "none", Runs: reps}
		var inline, queue, all []int64
		for range reps {
			for i := 1; i < 50; i++ {
				// Inline gaps are replay cost growing with the log; every
				// fifth step hops through the queue.
				if i%5 == 0 {
					x := int64((900 + 12*float64(i)) * speed(v) * math.Exp(0.2*r.NormFloat64()))
					queue = append(queue, x)
					all = append(all, x)
				} else {
					x := int64((60 + 3*float64(i)) * speed(v) * math.Exp(0.25*r.NormFloat64()))
					inline = append(inline, x)
					all = append(all, x)
				}
			}
		}
		c.Metrics = map[string]results.Metric{
			"ttfs":        metricOf(lognormal(r, reps, 800*speed(v), 0.2)),
			"stso":        perRunOf("stso", all, reps),
			"stso_inline": perRunOf("stso_inline", inline, reps),
			"stso_queue":  perRunOf("stso_queue", queue, reps),
			"wo":          metricOf(lognormal(r, reps, 25_000*speed(v), 0.1)),
			"ttc":         metricOf(lognormal(r, reps, 26_000*speed(v), 0.1)),
		}
		slope := 3.1 * speed(v)
		c.STSOSlopeUS = &slope
		f.Cells = append(f.Cells, c)
	}
	return f
}

// pathOf splits each run's TTLS (µs) into critical-path categories, as a
// sweep's cell keeps them: the queue wait grows with the branches for the
// versions that load the log on every completion, and a stalled run's
// time is queue wait (a redelivery after the visibility timeout).
func pathOf(ttls []int64, branches int, version string, stall bool) []results.PathCategory {
	weights := map[string]int64{metrics.CatStart: 3, metrics.CatQueueWait: 20, metrics.CatLogLoad: 6,
		metrics.CatWrite: 14, metrics.CatPublish: 9, metrics.CatRunRead: 4, metrics.CatContention: 10}
	if version != "pending-count" {
		weights[metrics.CatQueueWait] += int64(branches) / 4
		weights[metrics.CatContention] += int64(branches) / 8
	}
	var out []results.PathCategory
	for _, def := range metrics.Categories {
		out = append(out, results.PathCategory{Category: def.Name, Values: make([]int64, len(ttls))})
	}
	var total int64
	for _, w := range weights {
		total += w
	}
	for r, x := range ttls {
		left := x
		for i := range out {
			w := weights[out[i].Category]
			if stall && x > 100_000_000 {
				w = 0 // the stalled run: all queue wait
				if out[i].Category == metrics.CatQueueWait {
					w = total
				}
			}
			out[i].Values[r] = x * w / total
			left -= out[i].Values[r]
		}
		i, _ := metrics.CategoryIndex(metrics.CatCompute)
		out[i].Values[r] += left // the rounding: the engine's own time
	}
	for i := range out {
		vs := slices.Sorted(slices.Values(out[i].Values))
		out[i].P50, out[i].P90 = metrics.Quantile(vs, 50), metrics.Quantile(vs, 90)
		out[i].Mean = float64(sum(vs)) / float64(len(vs))
	}
	return out
}

func addEach(vs []int64, d int64) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = v + d
	}
	return out
}

var fixtureStart = time.Date(2026, 11, 28, 14, 30, 0, 0, time.UTC)

// fixtureHead is the sweep under review; fixtureBase the base commit's,
// where resilient is faster and pending-count slower than on the head.
func fixtureHead() *results.File { return clone(headJSON()) }

func fixtureBase() *results.File { return clone(baseJSON()) }

// fixtureHistory returns 3 earlier sweeps, one hour apart.
func fixtureHistory() []*results.File {
	var out []*results.File
	for _, js := range historyJSON() {
		out = append(out, clone(js))
	}
	return out
}

// The fixtures are built once (HDR encoding is slow under -race) and
// handed out as fresh copies, so a test may change its copy.
var (
	headJSON = sync.OnceValue(func() []byte {
		return mustJSON(fixture(fixtureOpts{commit: "a1b2c3d4e5f6", start: fixtureStart, seed: 1, stall: true}))
	})
	baseJSON = sync.OnceValue(func() []byte {
		return mustJSON(fixture(fixtureOpts{commit: "0f9e8d7c6b5a", start: fixtureStart.Add(-2 * time.Hour), seed: 2,
			speed: map[string]float64{"resilient": 0.8, "pending-count": 1.3}}))
	})
	historyJSON = sync.OnceValue(func() [][]byte {
		var out [][]byte
		for i := range 3 {
			out = append(out, mustJSON(fixture(fixtureOpts{
				commit: fmt.Sprintf("%07x", 0xabc0000+i*7919),
				start:  fixtureStart.Add(-time.Duration(i+3) * time.Hour),
				seed:   uint64(100 + i),
				speed:  map[string]float64{"baseline": 1 + float64(i%5)/20},
			})))
		}
		return out
	})
)

// variant is a copy of the head fixture on another profile, or marked
// partial (its first 5 cells, an error) or virtual-time: cheap to make.
func variant(profile string, partial, virtual bool) *results.File {
	f := fixtureHead()
	f.GitCommit = "feedface"
	if profile != "" {
		f.Plan.Profiles = []string{profile}
		for i := range f.Cells {
			f.Cells[i].Profile = profile
		}
	}
	if partial {
		f.Partial, f.Error = true, "interrupted: context canceled"
		f.Cells = f.Cells[:5]
	}
	f.VirtualTime = virtual
	return f
}

func mustJSON(f *results.File) []byte {
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return b
}

func clone(js []byte) *results.File {
	var f results.File
	if err := json.Unmarshal(js, &f); err != nil {
		panic(err)
	}
	return &f
}

func fixedNow() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC) }
