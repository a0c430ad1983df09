package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// timing is one run's figures on the adapter's clock, from the moment just
// before the start request was sent.
type timing struct{ ttfs, ttls, ttc time.Duration }

// measureRun starts one run through the protocol and times it from its
// timeline: TTFS = first step_started, TTLS = last step_completed, TTC =
// run_completed, each minus the adapter's clock read just before the start
// request (in-process, so no clock offset to correct).
func measureRun(t testing.TB, c *target.Client, a *Adapter, run, scenario string, opts map[string]string) timing {
	t.Helper()
	t0 := a.Now()
	if _, err := c.Start(context.Background(), protocol.StartRequest{Run: run, Scenario: scenario, Options: opts}); err != nil {
		t.Fatal(err)
	}
	tl, evs := follow(t, c, run, true)
	if tl.Status != protocol.StatusCompleted {
		t.Fatalf("%s: %s %s", run, tl.Status, tl.Error)
	}
	var m timing
	m.ttfs = -1
	for _, ev := range evs {
		d := time.Duration(ev.At) - t0
		switch ev.Kind {
		case protocol.EventStepStarted:
			if m.ttfs < 0 || d < m.ttfs {
				m.ttfs = d
			}
		case protocol.EventStepCompleted:
			m.ttls = max(m.ttls, d)
		case protocol.EventRunCompleted:
			m.ttc = d
		}
	}
	return m
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestMeasure prints TTFS/TTLS/TTC percentiles of fan-outs and the other
// scenarios (body 0) for the README. It runs only with GW_MEASURE=reps
// (e.g. GW_MEASURE=10 go test -run Measure -v); GW_CELLS=scenario:opt=v,...;... sets the cells,
// GW_POLLERS=wf,act the pollers, GW_MONO=0 polls instead of the monoprocess wake-ups.
func TestMeasure(t *testing.T) {
	reps, _ := strconv.Atoi(os.Getenv("GW_MEASURE"))
	if reps <= 0 {
		t.Skip("set GW_MEASURE=reps to measure")
	}
	cfg := DefaultConfig()
	if p := os.Getenv("GW_POLLERS"); p != "" {
		wf, act, _ := strings.Cut(p, ",")
		cfg.WorkflowPollers, _ = strconv.Atoi(wf)
		cfg.ActivityPollers, _ = strconv.Atoi(act)
	}
	if os.Getenv("GW_MONO") == "0" {
		cfg.Monoprocess = false
	}
	if iv := os.Getenv("GW_POLL_INTERVAL"); iv != "" {
		cfg.PollInterval, _ = time.ParseDuration(iv)
	}
	if os.Getenv("GW_NOLIMIT") == "1" { // to find the limits
		cfg.MaxBranches, cfg.MaxSteps = 1<<20, 1<<20
		followTimeout = 10 * time.Minute
		cfg.MaxHistory = 1 << 20
	}
	if ttl := os.Getenv("GW_CACHE_TTL"); ttl != "" {
		cfg.CacheTTL, _ = time.ParseDuration(ttl)
	}
	if f := os.Getenv("GW_SQLITE"); f != "" {
		cfg.SQLite = f
	}
	c, a := serve(t, cfg)
	cells := []struct {
		scenario string
		opts     map[string]string
	}{
		{"step", nil},
		{"hook-step", nil},
		{"sequential", map[string]string{"steps": "20"}},
		{"fanout", map[string]string{"branches": "20"}},
		{"fanout", map[string]string{"branches": "64"}},
		{"fanout", map[string]string{"branches": "256"}},
	}
	if spec := os.Getenv("GW_CELLS"); spec != "" { // e.g. fanout:branches=1024;sequential:steps=500
		cells = cells[:0]
		for _, cs := range strings.Split(spec, ";") {
			sc, kvs, _ := strings.Cut(cs, ":")
			opts := map[string]string{}
			for _, kv := range strings.Split(kvs, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					opts[k] = v
				}
			}
			cells = append(cells, struct {
				scenario string
				opts     map[string]string
			}{sc, opts})
		}
	}
	fmt.Printf("go-workflows %s sqlite (memory=%v) monoprocess=%v pollers wf=%d act=%d poll-interval=%v, %d runs each (1 warm-up), one at a time\n",
		Version, cfg.SQLite == "", cfg.Monoprocess, cfg.WorkflowPollers, cfg.ActivityPollers, cfg.PollInterval, reps)
	fmt.Printf("%-22s %10s %10s %10s %10s %10s %10s\n", "cell", "ttfs p50", "ttfs p90", "ttls p50", "ttls p90", "ttc p50", "ttc p90")
	for i, cell := range cells {
		name := cell.scenario
		for k, v := range cell.opts {
			name += " " + k + "=" + v
		}
		var ttfs, ttls, ttc []time.Duration
		for r := range reps + 1 {
			m := measureRun(t, c, a, fmt.Sprintf("m%d-%d", i, r), cell.scenario, cell.opts)
			if r == 0 {
				continue
			}
			ttfs, ttls, ttc = append(ttfs, m.ttfs), append(ttls, m.ttls), append(ttc, m.ttc)
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
		fmt.Printf("%-22s %10s %10s %10s %10s %10s %10s\n", name, ms(pct(ttfs, .5)), ms(pct(ttfs, .9)),
			ms(pct(ttls, .5)), ms(pct(ttls, .9)), ms(pct(ttc, .5)), ms(pct(ttc, .9)))
	}
}

// TestMeasureDriver measures the same cells through durabench's own driver
// (target.Session over loopback HTTP, closed pacing, one run at a time,
// clock offset from min-RTT probes) and durabench's metric definitions
// (metrics.TimeToFirstStep / TimeToLastStep / TimeToCompletion from each
// run's scheduled start). GW_MEASURE=reps enables it, like TestMeasure.
func TestMeasureDriver(t *testing.T) {
	reps, _ := strconv.Atoi(os.Getenv("GW_MEASURE"))
	if reps <= 0 {
		t.Skip("set GW_MEASURE=reps to measure")
	}
	c, _ := serve(t, DefaultConfig())
	hs := c.URL()
	fmt.Printf("durabench driver over the protocol: go-workflows %s sqlite in-memory, defaults, %d runs per cell (1 warm-up), closed pacing, concurrency 1\n", Version, reps)
	fmt.Printf("%-22s %10s %10s %10s %10s %10s %10s\n", "cell", "ttfs p50", "ttfs p90", "ttls p50", "ttls p90", "ttc p50", "ttc p90")
	for i, cell := range []struct {
		scenario string
		opts     map[string]string
	}{
		{"step", nil},
		{"hook-step", nil},
		{"sequential", map[string]string{"steps": "20"}},
		{"fanout", map[string]string{"branches": "20"}},
		{"fanout", map[string]string{"branches": "64"}},
		{"fanout", map[string]string{"branches": "256"}},
	} {
		res := driverCell(t, hs, fmt.Sprintf("d%d", i), cell.scenario, cell.opts, reps)
		var ttfs, ttls, ttc []time.Duration
		for _, tl := range res.Timelines {
			if !tl.Finished || tl.Failed {
				t.Fatalf("run %s: finished %v failed %v (%s)", tl.ID, tl.Finished, tl.Failed, tl.Error)
			}
			f, _ := metrics.TimeToFirstStep(&tl)
			l, _ := metrics.TimeToLastStep(&tl)
			ttfs, ttls, ttc = append(ttfs, f), append(ttls, l), append(ttc, metrics.TimeToCompletion(&tl))
		}
		name := cell.scenario
		for k, v := range cell.opts {
			name += " " + k + "=" + v
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
		fmt.Printf("%-22s %10s %10s %10s %10s %10s %10s\n", name, ms(pct(ttfs, .5)), ms(pct(ttfs, .9)),
			ms(pct(ttls, .5)), ms(pct(ttls, .9)), ms(pct(ttc, .5)), ms(pct(ttc, .9)))
	}
}

// driverCell runs one cell through durabench's driver against the target
// at url.
func driverCell(t *testing.T, url, prefix, scenario string, opts map[string]string, reps int) *driver.Result {
	t.Helper()
	ctx := context.Background()
	c, err := target.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.Get(scenario)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		t.Fatal(err)
	}
	local := mem.New(world.Options{}) // the driver's clock only
	defer local.Close()
	sess, err := target.NewSession(ctx, c, scenario, opts, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	pacer, err := driver.NewPacer("closed", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := driver.Run(ctx, driver.Config{World: local, Program: p, RunPrefix: prefix, Reps: reps, Warmup: 1,
		Pacer: pacer, CellTimeout: 5 * time.Minute, Target: sess})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || len(res.Timelines) != reps {
		t.Fatalf("%s: timed out %v, %d timelines of %d", scenario, res.TimedOut, len(res.Timelines), reps)
	}
	return res
}
