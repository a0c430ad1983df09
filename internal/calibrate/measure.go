package calibrate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// CellTimeout bounds each phase of a measured cell in virtual time: long
// enough for every run of a stall hunt to wait out its visibility timeout.
const CellTimeout = 6 * time.Hour

// Defaults of a table that leaves them out.
const (
	DefaultReps   = 20
	DefaultWarmup = 2
)

// A runner measures a table's cells under candidate profiles. Each cell is
// planned once (as a sweep plan of one cell on sim); a measurement gives the
// planned cell the candidate under one name (sweep.CellPlan.WithProfile), so
// every candidate sees the same seeds and run ids — those a sweep of a
// profile of that name has.
type runner struct {
	table *Table
	name  string
	cells []plannedCell
}

type plannedCell struct {
	obs  *Observation
	plan *sweep.Plan
	cell sweep.CellPlan
}

// newRunner plans every cell of t with plan seed seed, its candidates to be
// measured as the profile called name.
func newRunner(t *Table, name string, seed int64) (*runner, error) {
	r := &runner{table: t, name: name}
	for i := range t.Cells {
		c := &t.Cells[i]
		// Planned with "none", which always loads; WithProfile puts the
		// candidate in its place.
		p, err := c.plan(t, "none", seed)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", t.File, c.Line, err)
		}
		cells, err := p.Cells()
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", t.File, c.Line, err)
		}
		if len(cells) != 1 {
			return nil, fmt.Errorf("%s:%d: the cell plans %d cells, want 1", t.File, c.Line, len(cells))
		}
		r.cells = append(r.cells, plannedCell{obs: c, plan: p, cell: cells[0]})
	}
	return r, nil
}

// plan is the sweep plan of the cell alone on sim.
func (c *Observation) plan(t *Table, prof string, seed int64) (*sweep.Plan, error) {
	p := sweep.DefaultPlan()
	p.Worlds = []string{"sim"}
	p.Profiles = []string{prof}
	sp := sweep.ScenarioPlan{Name: c.Scenario, Options: map[string][]string{}}
	for k, v := range c.Options {
		sp.Options[k] = []string{v}
	}
	p.Scenarios = []sweep.ScenarioPlan{sp}
	p.Branches = nil
	v, err := t.version(c.Version)
	if err != nil {
		return nil, err
	}
	p.Versions = []engine.Version{v}
	sw, err := engine.ParseSwitchSet(c.Switches)
	if err != nil {
		return nil, err
	}
	p.Switches = []engine.SwitchSet{sw}
	p.Reps, p.Warmup = c.reps(t)
	p.CellTimeout = CellTimeout
	p.Seed = seed
	if c.RetryStyle != "" {
		p.RetryStyle = c.RetryStyle
	}
	if c.VisibilityTimeout > 0 {
		p.VisibilityTimeout = c.VisibilityTimeout
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *Observation) reps(t *Table) (reps, warmup int) {
	reps, warmup = t.Reps, t.Warmup
	if c.Reps > 0 {
		reps = c.Reps
	}
	if c.Warmup != unset {
		warmup = c.Warmup
	}
	return reps, warmup
}

// unset marks a cell's Warmup the table left to its default (0 is a value).
const unset = -1

// measure runs cell i under prof and returns its figures' values, in the
// order of its Figures.
func (r *runner) measure(ctx context.Context, i int, prof *profile.Profile) ([]float64, error) {
	pc := r.cells[i]
	c := pc.cell.WithProfile(r.name, prof)
	var timer *opTimer
	rc, err := pc.plan.Measure(ctx, c, func(w world.World) world.World {
		timer = newOpTimer(w, measuredRun(c.Hash))
		return timer
	})
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %s: %w", r.table.File, pc.obs.Line, pc.obs.Label(), err)
	}
	out := make([]float64, len(pc.obs.Figures))
	for j, f := range pc.obs.Figures {
		out[j] = value(f, rc, timer)
	}
	return out, nil
}

// value is figure f as the measured cell rc (and the timer of its world's
// calls) shows it. A figure with no samples is 0.
func value(f Figure, rc results.Cell, t *opTimer) float64 {
	switch {
	case f.Metric == "stalls":
		if rc.Runs == 0 {
			return 0
		}
		return float64(rc.Stalls) / float64(rc.Runs)
	case f.Metric == "stall_ttls":
		var us []int64
		for _, s := range rc.StalledRuns {
			us = append(us, int64(s.TTLSMS*1000))
		}
		return stat(f.Stat, us)
	case strings.HasPrefix(f.Metric, "op."):
		return stat(f.Stat, micros(t.opSamples(world.Op(strings.TrimPrefix(f.Metric, "op.")))))
	case f.Metric == DispatchCreate || f.Metric == DispatchPublish:
		return stat(f.Stat, micros(t.spanSamples(f.Metric)))
	}
	m, ok := rc.Metrics[f.Metric]
	if !ok {
		return 0
	}
	return stat(f.Stat, m.Values)
}

// Span metrics.
const (
	DispatchCreate  = "dispatch.create"
	DispatchPublish = "dispatch.publish"
)

func micros(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Microseconds()
	}
	return out
}

// stat is the statistic of samples in µs, as a duration in ns: nearest-rank
// percentiles as every durabench figure.
func stat(name string, us []int64) float64 {
	if len(us) == 0 {
		return 0
	}
	sorted := slices.Clone(us)
	slices.Sort(sorted)
	var v float64
	switch name {
	case "max":
		v = float64(sorted[len(sorted)-1])
	case "mean":
		var sum float64
		for _, x := range sorted {
			sum += float64(x)
		}
		v = sum / float64(len(sorted))
	default:
		q, _ := strconv.ParseFloat(strings.TrimPrefix(name, "p"), 64)
		v = float64(metrics.Quantile(sorted, q))
	}
	return v * float64(time.Microsecond)
}

// cost estimates a cell's measuring time: runs × steps per run.
func (c plannedCell) cost() int {
	steps := 0
	for _, s := range c.cell.Program.Stages {
		steps += max(s.Steps, 1)
	}
	return (c.plan.Reps + c.plan.Warmup) * steps
}
