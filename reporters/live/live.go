// Package live serves a running sweep's figures as Prometheus metrics
// (durabench sweep --metrics-addr), so a long sweep or a soak can be watched
// in Grafana while it runs: runs started, completed, failed and stalled,
// step bodies executed (steps/s is their rate), runs in flight, world
// incidents, driver lag, and TTFS and TTLS as histograms, every series
// labelled by its cell.
//
// The figures are the ones results.json ends up with: measured runs only
// (warm-ups are left out, as the results leave them out), TTFS and TTLS of
// every run that did not fail (a stalled run's TTLS is its elapsed time at
// the cell timeout), stalls as the cell's stall rule counted them when the
// cell ended. A resumed sweep's cells finished earlier are not counted:
// nothing ran for them.
package live

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// CellLabels are the label names every per-cell series carries, in order.
var CellLabels = []string{"scenario", "branches", "version", "switches", "world", "target"}

// DefaultTarget is the target label of cells that run the built-in engine
// (a --targets name labels the cells of that engine).
const DefaultTarget = "reference"

// cellLabelValues are c's values for CellLabels. A cell of another engine
// has no version, switches or world of durabench's (as in the results).
func cellLabelValues(c sweep.CellPlan) []string {
	if c.Target != nil {
		return []string{c.Scenario.Name, c.Options["branches"], "", "", "", c.Target.Name}
	}
	return []string{c.Scenario.Name, c.Options["branches"], c.Version.Name, c.Switches.String(),
		c.World.Name, DefaultTarget}
}

// latencyBuckets are the classic histogram buckets of every latency, in
// seconds: 1, 2 and 5 × 10ⁿ from 100 µs to 1000 s, so that a mem-world
// fan-out (hundreds of µs) and a 300 s stall both fall in a bucket of their
// own. Prometheus' default buckets stop at 10 s. The histograms are native
// histograms as well (factor 1.1), for a server that scrapes them.
var latencyBuckets = func() []float64 {
	var b []float64
	for e := -4; e <= 3; e++ {
		for _, m := range []float64{1, 2, 5} {
			b = append(b, m*math.Pow10(e))
		}
	}
	return b
}()

// Metrics is the registry of one sweep's live metrics. Its Progress feeds
// it; Handler (or Serve) exposes it.
type Metrics struct {
	reg *prometheus.Registry

	started, completed, failed, stalled, steps *prometheus.CounterVec
	inflight                                   *prometheus.GaugeVec
	incidents                                  *prometheus.CounterVec
	ttfs, ttls, lag                            *prometheus.HistogramVec
	cellsTotal                                 prometheus.Gauge
	cellsDone                                  prometheus.Counter
	cellsFailed                                prometheus.Counter

	cell atomic.Pointer[cellState] // the running cell
}

// cellState is the running cell's curried series and what it reported.
type cellState struct {
	plan     sweep.CellPlan
	labels   []string
	declared func(name string) bool

	started, completed, failed, stalled, steps prometheus.Counter
	inflight                                   prometheus.Gauge
	ttfs, ttls                                 prometheus.Observer

	mu          sync.Mutex
	lastStarted int // runs of the measured phase counted as started
	finished    int // measured runs finished or given up
}

// New returns an empty registry with durabench's metrics and the Go
// runtime's and process' collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "durabench", Name: name, Help: help}, labels)
	}
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "durabench", Name: name, Help: help,
			Buckets: latencyBuckets, NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160,
			NativeHistogramMinResetDuration: time.Hour}, CellLabels)
	}
	m := &Metrics{
		reg:       reg,
		started:   counter("runs_started_total", "Measured runs started (warm-ups excluded).", CellLabels...),
		completed: counter("runs_completed_total", "Measured runs that finished without failing.", CellLabels...),
		failed:    counter("runs_failed_total", "Measured runs that failed (results.json: errors).", CellLabels...),
		stalled: counter("runs_stalled_total", "Measured runs counted as stalls when their cell ended: "+
			"unfinished at the cell timeout, never started, or over the stall threshold (results.json: stalls).", CellLabels...),
		steps: counter("steps_total", "Step-body executions of measured runs (a redelivered step counts once per execution); "+
			"rate() is steps/s.", CellLabels...),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "durabench", Name: "runs_in_flight",
			Help: "Measured runs started and not yet finished."}, CellLabels),
		incidents: counter("world_incidents_total", "World incidents by kind, added when the cell ends "+
			"(results.json: world_incidents).", append(append([]string{}, CellLabels...), "kind")...),
		ttfs: hist("ttfs_seconds", "TTFS: first step body start − the run's scheduled start, per measured run that did not fail."),
		ttls: hist("ttls_seconds", "TTLS: last step end (step_completed written) − the run's scheduled start, per measured run that did not fail "+
			"(a run unfinished at the cell timeout: its elapsed time then)."),
		lag: hist("driver_lag_seconds", "Actual − scheduled start of each measured run (open-loop pacing), added when the cell ends."),
		cellsTotal: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "durabench", Name: "sweep_cells",
			Help: "Cells in the sweep's plan."}),
		cellsDone: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "durabench", Name: "cells_done_total",
			Help: "Cells finished (resumed cells included)."}),
		cellsFailed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "durabench", Name: "cells_failed_total",
			Help: "Cells that failed or were interrupted."}),
	}
	reg.MustRegister(m.started, m.completed, m.failed, m.stalled, m.steps, m.inflight, m.incidents,
		m.ttfs, m.ttls, m.lag, m.cellsTotal, m.cellsDone, m.cellsFailed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are in, for a caller that serves
// them itself.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Progress returns a sweep.Progress that updates m and passes every event
// on to next (nil: none).
func (m *Metrics) Progress(next sweep.Progress) sweep.Progress {
	if next == nil {
		next = sweep.NoProgress{}
	}
	return &progress{m: m, next: next}
}

type progress struct {
	m    *Metrics
	next sweep.Progress
}

func (p *progress) Start(cells []sweep.CellPlan, reused, runsPerCell int) {
	p.m.cellsTotal.Set(float64(len(cells)))
	p.next.Start(cells, reused, runsPerCell)
}

func (p *progress) CellStart(i int, c sweep.CellPlan) {
	m, lv := p.m, cellLabelValues(c)
	st := &cellState{plan: c, labels: lv,
		started: m.started.WithLabelValues(lv...), completed: m.completed.WithLabelValues(lv...),
		failed: m.failed.WithLabelValues(lv...), stalled: m.stalled.WithLabelValues(lv...),
		steps: m.steps.WithLabelValues(lv...), inflight: m.inflight.WithLabelValues(lv...),
		ttfs: m.ttfs.WithLabelValues(lv...), ttls: m.ttls.WithLabelValues(lv...),
		declared: func(name string) bool {
			// A report shows only the metrics the scenario declares.
			if len(c.Scenario.Metrics) == 0 {
				return true
			}
			for _, d := range c.Scenario.Metrics {
				if d == name {
					return true
				}
			}
			return false
		},
	}
	// Every series of the cell exists from its start, at 0.
	st.stalled.Add(0)
	p.m.cell.Store(st)
	p.next.CellStart(i, c)
}

func (p *progress) Run(ev driver.CellProgress) {
	if st := p.m.cell.Load(); st != nil && !ev.Warmup {
		st.run(ev)
	}
	p.next.Run(ev)
}

// run counts one measured run's report.
func (st *cellState) run(ev driver.CellProgress) {
	st.mu.Lock()
	if d := ev.Started - st.lastStarted; d > 0 {
		st.started.Add(float64(d))
		st.lastStarted = ev.Started
	}
	st.finished++
	st.inflight.Set(float64(st.lastStarted - st.finished))
	st.mu.Unlock()
	tl := ev.Run
	if tl == nil {
		return
	}
	st.steps.Add(float64(len(tl.Steps)))
	switch {
	case tl.Failed:
		st.failed.Inc()
		return // failed runs give no latency, as in the results
	case tl.Finished:
		st.completed.Inc()
	}
	if d, ok := metrics.TimeToFirstStep(tl); ok && st.declared(metrics.TTFS) {
		st.ttfs.Observe(seconds(d))
	}
	if d, ok := metrics.TimeToLastStep(tl); ok && st.declared(metrics.TTLS) {
		st.ttls.Observe(seconds(d))
	}
}

// seconds is d in seconds at the results' microsecond resolution, negative
// values (clock skew between hosts) clamped to 0 as the results clamp them.
func seconds(d time.Duration) float64 {
	return float64(max(d, 0).Microseconds()) / 1e6
}

func (p *progress) CellDone(i int, c sweep.CellPlan, rc *results.Cell, reused bool) {
	p.m.cellsDone.Inc()
	if st := p.m.cell.Swap(nil); st != nil && !reused {
		p.m.cellDone(st, rc)
	}
	p.next.CellDone(i, c, rc, reused)
}

// cellDone settles the cell's counters with its results: runs started
// that reported nothing, stalls, incidents and driver lag.
func (m *Metrics) cellDone(st *cellState, rc *results.Cell) {
	notStarted := 0
	for _, s := range rc.StalledRuns {
		if s.NotStarted {
			notStarted++
		}
	}
	st.mu.Lock()
	if d := rc.Runs - notStarted - st.lastStarted; d > 0 {
		st.started.Add(float64(d))
		st.lastStarted += d
	}
	st.mu.Unlock()
	st.inflight.Set(0)
	st.stalled.Add(float64(rc.Stalls))
	if inc := rc.WorldIncidents; inc != nil {
		for _, k := range []struct {
			kind string
			n    int64
		}{{"dropped", inc.Dropped}, {"slow_consumer", inc.SlowConsumer}, {"timeouts", inc.Timeouts},
			{"gaps", inc.Gaps}, {"disconnects", inc.Disconnects}, {"reconnects", inc.Reconnects},
			{"async_errors", inc.AsyncErrors}, {"transient", inc.Transient}} {
			if k.n > 0 {
				m.incidents.WithLabelValues(append(append([]string{}, st.labels...), k.kind)...).Add(float64(k.n))
			}
		}
	}
	if rc.DriverLag != nil {
		lag := m.lag.WithLabelValues(st.labels...)
		for _, us := range rc.DriverLag.Values {
			lag.Observe(float64(us) / 1e6)
		}
	}
}

func (p *progress) CellFailed(i int, c sweep.CellPlan, err error) {
	p.m.cellsFailed.Inc()
	if st := p.m.cell.Swap(nil); st != nil {
		st.inflight.Set(0)
	}
	p.next.CellFailed(i, c, err)
}

func (p *progress) Finish() { p.next.Finish() }
