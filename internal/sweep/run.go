package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/registry"
)

// Output file names inside a sweep's directory.
const (
	ResultsName = "results.json"
	ReportName  = "report.md"
)

// ErrInterrupted is returned when the sweep was interrupted (Ctrl-C): the
// results file holds every finished cell and is marked partial.
var ErrInterrupted = errors.New("sweep interrupted")

// Config configures Run.
type Config struct {
	Plan *Plan
	// Out is the output directory (results.json, report.md, the journal).
	Out string
	// Resume skips the cells already finished in Out (journal or results).
	Resume bool
	// Progress receives progress events; nil shows none.
	Progress Progress
}

// Outcome is what Run wrote.
type Outcome struct {
	File        *results.File
	ResultsPath string
	// ReportPath is empty when no report was written (partial sweeps).
	ReportPath string
	// Reused counts cells taken from an earlier, interrupted run.
	Reused int
	// Kept says what the sweep left on shared servers for the user to
	// inspect or remove (nats --keep: its streams), one note per world.
	Kept []string
}

// Run runs the plan's cells one by one, each on a fresh world, appending
// every finished cell to the journal and writing results.json (atomically)
// and report.md at the end. Cancelling ctx interrupts the sweep: runs in
// flight get the plan's grace period, results.json is written marked partial
// with every finished cell, and the error wraps ErrInterrupted. A cell whose
// world cannot be set up or that cannot start a single run stops the sweep
// with an error matching results.ErrSweepFailed, after writing the partial
// results. Mistakes in the plan or the flags are *UsageErrors.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	p := cfg.Plan
	cells, err := p.Cells()
	if err != nil {
		return nil, err
	}
	done, err := prepareOut(p, cfg)
	if err != nil {
		return nil, err
	}
	journal, err := results.OpenJournal(cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", results.ErrSweepFailed, err)
	}
	defer journal.Close()
	r, closeRun, err := startRun(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	defer closeRun()

	out := r.outcome(ctx, cells, cfg.Out)
	for _, c := range cells {
		if _, ok := done[c.Key]; ok {
			out.Reused++
		}
	}
	r.prog.Start(cells, out.Reused, p.Warmup+p.Reps)
	failure, interrupted := r.runCells(ctx, cells, done, journal, out.File)
	r.prog.Finish()
	return finish(cfg.Out, cells, out, journal, failure, interrupted)
}

// prepareOut makes the output directory ready: the temporary files of a
// killed write removed, and, unless the sweep resumes, the files of an
// earlier sweep. It returns the cells an earlier run finished (resume).
func prepareOut(p *Plan, cfg Config) (map[string]results.Cell, error) {
	done := map[string]results.Cell{}
	if cfg.Resume {
		var err error
		if done, err = p.finishedCells(cfg.Out); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, &UsageError{Flag: "--out", Err: err}
	}
	// A sweep killed while writing its results (SIGKILL, a power cut)
	// left their temporary files.
	_ = results.RemoveTemp(filepath.Join(cfg.Out, ResultsName))
	_ = os.Remove(filepath.Join(cfg.Out, ReportName) + ".tmp")
	if !cfg.Resume {
		// A fresh sweep into a used directory must not mix with, or look
		// like, the earlier sweep's files.
		for _, name := range []string{results.JournalName, ResultsName, ReportName} {
			if err := os.Remove(filepath.Join(cfg.Out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, &UsageError{Flag: "--out", Err: err}
			}
		}
	}
	return done, nil
}

// sweepRun is one Run of a plan: the plan, read only, and the state the run
// made — its id, the foreign targets it reached, where progress goes.
type sweepRun struct {
	plan *Plan
	// id is drawn afresh by every Run (a resumed one included): each
	// cell's resources on a shared server are named
	// "durabench_<id>_<cell hash>" (nats: its streams), so two sweeps of
	// the same plan on one server, or a crashed sweep's leftovers, never
	// share one.
	id string
	// live are the foreign targets the run reached, by name.
	live map[string]*liveTarget
	prog Progress
}

// startRun draws the run's id and starts the plan's foreign targets (their
// logs in the output directory); closeRun stops them.
func startRun(ctx context.Context, p *Plan, cfg Config) (r *sweepRun, closeRun func(), err error) {
	r = &sweepRun{plan: p, prog: cfg.Progress}
	if r.prog == nil {
		r.prog = NoProgress{}
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: sweep id: %w", results.ErrSweepFailed, err)
	}
	r.id = hex.EncodeToString(id[:])
	if len(p.foreignTargets()) == 0 {
		return r, func() {}, nil
	}
	logs := filepath.Join(cfg.Out, "targets.log")
	lf, err := os.OpenFile(logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, &UsageError{Flag: "--out", Err: err}
	}
	live, closeTargets, err := p.openTargets(ctx, lf)
	if err != nil {
		lf.Close()
		var ue *UsageError
		if errors.As(err, &ue) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: %w (adapter logs: %s)", results.ErrSweepFailed, err, logs)
	}
	r.live = live
	return r, func() { closeTargets(); lf.Close() }, nil
}

// outcome is the run's results file, not yet holding a cell, and what the
// run leaves on shared servers.
func (r *sweepRun) outcome(ctx context.Context, cells []CellPlan, dir string) *Outcome {
	p := r.plan
	f := results.NewFile(ctx, p.resultsPlan(), time.Now())
	// Virtual figures only when every cell's clock is virtual.
	f.VirtualTime = !slices.ContainsFunc(cells, func(c CellPlan) bool { return !c.World.VirtualTime })
	if !f.VirtualTime {
		f.Host.Pacer = driver.Calibrate().Record()
	}
	out := &Outcome{File: f, ResultsPath: filepath.Join(dir, ResultsName)}
	for _, name := range p.Worlds {
		if k, err := registry.Lookup(name); err == nil && k.Kept != nil {
			if note := k.Kept(p.WorldSettings[name], r.sweepPrefix()); note != "" {
				out.Kept = append(out.Kept, note)
			}
		}
	}
	return out
}

// runCells runs the cells in order into f, taking the ones in done as they
// are and appending every cell it runs to the journal. It stops at the
// first cell that fails (failure) or when ctx ends (interrupted).
func (r *sweepRun) runCells(ctx context.Context, cells []CellPlan, done map[string]results.Cell, journal *results.Journal,
	f *results.File) (failure error, interrupted bool) {
	pairs := r.pairsByCell()
	for i, c := range cells {
		if cp, ok := pairs[i]; ok {
			if cp.a != i {
				continue // run with its partner, the pair's A
			}
			if failure, interrupted = r.runPairCells(ctx, cp, cells, done, journal, f); failure != nil || interrupted {
				return failure, interrupted
			}
			continue
		}
		if prev, ok := done[c.Key]; ok {
			f.Cells = append(f.Cells, prev)
			r.prog.CellDone(i, c, &prev, true)
			continue
		}
		if ctx.Err() != nil {
			return nil, true
		}
		r.prog.CellStart(i, c)
		rc, res, err := r.runCell(ctx, c)
		var stop *stopAfterCell
		switch {
		case errors.As(err, &stop):
			// The cell ran and is kept; nothing after it can.
			if jerr := journal.Append(rc); jerr != nil {
				return jerr, false
			}
			f.Cells = append(f.Cells, rc)
			r.prog.CellDone(i, c, &rc, false)
			return fmt.Errorf("after cell %s: %w", c.Label(), stop.err), false
		case err != nil:
			r.prog.CellFailed(i, c, err)
			return fmt.Errorf("cell %s: %w", c.Label(), err), false
		case res.Interrupted:
			r.prog.CellFailed(i, c, ErrInterrupted)
			return nil, true
		}
		if err := journal.Append(rc); err != nil {
			return err, false
		}
		f.Cells = append(f.Cells, rc)
		r.prog.CellDone(i, c, &rc, false)
	}
	return nil, false
}

// finish writes the results file (partial after a failure or an
// interruption, naming the cells it lacks) and, for a complete sweep, the
// report; the journal then has nothing the results lack and goes.
func finish(dir string, cells []CellPlan, out *Outcome, journal *results.Journal, failure error, interrupted bool) (*Outcome, error) {
	f := out.File
	f.FinishedAt = time.Now().UTC()
	switch {
	case failure != nil:
		f.Partial, f.Error = true, failure.Error()
	case interrupted:
		f.Partial, f.Error = true, "interrupted"
	}
	if f.Partial {
		// Interleaved pairs run at their first cell's place, so the cells
		// present are not always a prefix of the plan's.
		have := map[string]bool{}
		for _, c := range f.Cells {
			have[KeyOf(c)] = true
		}
		for _, c := range cells {
			if !have[c.Key] {
				f.Missing = append(f.Missing, c.Label())
			}
		}
	}
	if err := results.Write(out.ResultsPath, f); err != nil {
		return out, fmt.Errorf("%w: %w", results.ErrSweepFailed, err)
	}
	if failure != nil {
		return out, fmt.Errorf("%w: %w", results.ErrSweepFailed, failure)
	}
	if interrupted {
		return out, ErrInterrupted
	}
	rp := filepath.Join(dir, ReportName)
	if err := writeReport(rp, f); err != nil {
		return out, fmt.Errorf("%w: report: %w", results.ErrSweepFailed, err)
	}
	out.ReportPath = rp
	if err := journal.Discard(); err != nil {
		return out, fmt.Errorf("%w: %w", results.ErrSweepFailed, err)
	}
	return out, nil
}

func writeReport(path string, f *results.File) error {
	tmp := path + ".tmp"
	w, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := reporters.Markdown(w, f, reporters.Options{}); err != nil {
		w.Close()
		os.Remove(tmp)
		return err
	}
	if err := w.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// runCell runs one cell on a fresh world.
func (r *sweepRun) runCell(ctx context.Context, c CellPlan) (results.Cell, *driver.Result, error) {
	if c.Target != nil {
		return r.runCellTarget(ctx, c)
	}
	if r.plan.External.Enabled() {
		return r.runCellExternal(ctx, c)
	}
	w, err := r.newWorld(context.WithoutCancel(ctx), c)
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("world %s: %w", c.World.Name, err)
	}
	defer w.close()
	dc := r.driverConfig(c, w, c.Hash)
	var res *driver.Result
	var derr error
	var cpu *results.CellCPU // real time only: a sim cell replays its seed exactly, results and all
	if err := w.run(ctx, func(ctx context.Context) {
		var m *cpuMeter
		if !c.World.VirtualTime {
			m = startCPU(nil)
		}
		res, derr = driver.Run(ctx, dc)
		if m != nil {
			cpu = m.stop()
		}
	}); err != nil && res == nil {
		if ctx.Err() != nil {
			return results.Cell{}, &driver.Result{Interrupted: true}, nil
		}
		return results.Cell{}, nil, err
	}
	if derr != nil {
		return results.Cell{}, nil, derr
	}
	if res.Interrupted {
		return results.Cell{}, res, nil
	}
	rc := c.summarize(res, c.Identity)
	rc.CPU = cpu
	// The world is the cell's own: its incident counts are the cell's.
	if inc := world.IncidentsOf(w.World); inc.Total() > 0 {
		rc.WorldIncidents = &inc
	}
	return rc, res, nil
}

// driverConfig is how the driver runs cell c on world w, its run ids
// starting with prefix: the plan's reps, warm-up, timeouts and grace, the
// cell's pacer and seed.
func (r *sweepRun) driverConfig(c CellPlan, w world.World, prefix string) driver.Config {
	p := r.plan
	dc := driver.Config{
		World: w, Features: c.Features, Program: c.Program,
		RunPrefix: prefix, Reps: p.Reps, Warmup: p.Warmup, Pacer: c.Pacer,
		CellTimeout: p.CellTimeout, Grace: p.Grace, Seed: c.Seed, NoSpans: !p.Spans,
		OnRun: r.prog.Run,
	}
	if c.pair != nil {
		c.pair.apply(&dc)
	}
	return dc
}

// metricsConfig is how the timelines of prog become metrics: the plan's stall
// rule, the stream pacing SO is measured against and the race stages.
func (p *Plan) metricsConfig(prog engine.Program) metrics.Config {
	return metrics.Config{
		Stall:         metrics.StallRule{Threshold: p.StallThreshold, VisibilityTimeout: p.VisibilityTimeout},
		ChunkInterval: scenarios.ChunkInterval(prog),
		Stream:        scenarios.Stream(prog),
		Races:         metrics.Races(prog),
	}
}

// summarize is what the driver's result measured as the cell id (the
// cell's identity, or a target's with what the target says of itself):
// only the metrics the cell's scenario declares, so a report never shows a
// figure the scenario does not measure (a stream's TTLS), and the identity
// of a replayed cadence.
func (c CellPlan) summarize(res *driver.Result, id results.Cell) results.Cell {
	rc := res.Summarize(id, c.Metrics, c.Pacer.Open())
	rc.CadenceSHA256 = c.CadenceSHA256
	if len(c.Scenario.Metrics) == 0 {
		return rc
	}
	for name := range rc.Metrics {
		if !slices.Contains(c.Scenario.Metrics, name) {
			delete(rc.Metrics, name)
		}
	}
	if !c.reports(metrics.TTLS) {
		rc.CriticalPath = nil // the split of a TTLS the cell does not report
	}
	if !c.reports(metrics.TTC) {
		rc.CompletionPath = nil // nor of a TTC
	}
	return rc
}

// reports reports whether the cell's scenario reports metric (a scenario
// that declares no metrics reports every one): TTLS, whether its cells
// carry a critical path; TTC, a path to completion.
func (c CellPlan) reports(metric string) bool {
	return len(c.Scenario.Metrics) == 0 || slices.Contains(c.Scenario.Metrics, metric)
}

// identity is the results.Cell key fields of c.
func (c CellPlan) identity() results.Cell {
	id := results.Cell{Scenario: c.Scenario.Name, Version: c.Version.Name,
		Switches: c.Switches.List(), World: c.World.Name, Profile: c.ProfileName}
	if c.Target != nil {
		id.Target, id.Version, id.Switches, id.World = c.Target.ID(), "", nil, ""
	}
	// Branches and steps have fields of their own; other options are kept
	// when they differ from the scenario's default, so labels stay short.
	for k, v := range c.Options {
		switch k {
		case "branches":
			id.Branches = c.Options.Int(k)
		case "steps":
			id.Steps = c.Options.Int(k)
		default:
			if o, ok := c.Scenario.Option(k); ok && o.Default == v {
				continue
			}
			if id.Options == nil {
				id.Options = map[string]string{}
			}
			id.Options[k] = v
		}
	}
	return id
}

// finishedCells reads the cells an earlier run of this plan finished in dir:
// the journal, and the cells of a partial results.json. A results file whose
// settings differ from the plan's is an error: its cells measured something
// else.
func (p *Plan) finishedCells(dir string) (map[string]results.Cell, error) {
	out := map[string]results.Cell{}
	rp := filepath.Join(dir, ResultsName)
	f, err := results.Read(rp)
	switch {
	case err == nil:
		if err := p.compatible(f.Plan); err != nil {
			return nil, &UsageError{Flag: "--resume", Value: dir, Err: err}
		}
		for _, c := range f.Cells {
			out[KeyOf(c)] = c
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("--resume: %w", err)
	}
	cells, err := results.ReadJournal(filepath.Join(dir, results.JournalName))
	switch {
	case err == nil:
		for _, c := range cells {
			if _, ok := out[KeyOf(c)]; !ok {
				out[KeyOf(c)] = c
			}
		}
	case errors.Is(err, fs.ErrNotExist):
		if len(out) == 0 {
			return nil, &UsageError{Flag: "--resume", Value: dir, Msg: "no results.json and no journal there"}
		}
	default:
		return nil, fmt.Errorf("--resume: %w", err)
	}
	return out, nil
}

// compatible reports whether cells measured under plan rp can stand next to
// cells measured under p.
func (p *Plan) compatible(rp results.PlanRecord) error {
	mine := p.resultsPlan()
	type setting struct {
		name     string
		old, new any
	}
	for _, s := range []setting{
		{"reps", rp.Reps, mine.Reps}, {"warmup", rp.Warmup, mine.Warmup}, {"pace", rp.Pace, mine.Pace},
		{"concurrency", rp.Concurrency, mine.Concurrency}, {"rate", rp.Rate, mine.Rate},
		{"cell-timeout", rp.CellTimeoutMS, mine.CellTimeoutMS}, {"seed", rp.Seed, mine.Seed},
		{"stall-threshold", rp.StallThresholdMS, mine.StallThresholdMS},
		{"world options", rp.WorldOptions, mine.WorldOptions}, {"spans", spansWord(rp), spansWord(mine)},
		{"scenarios", fmt.Sprint(rp.Scenarios), fmt.Sprint(mine.Scenarios)},
		{"options", fmt.Sprint(rp.Options), fmt.Sprint(mine.Options)},
		{"branches", fmt.Sprint(rp.Branches), fmt.Sprint(mine.Branches)},
		{"versions", versionNames(rp.Versions), versionNames(mine.Versions)},
		{"switches", fmt.Sprint(rp.Switches), fmt.Sprint(mine.Switches)},
		{"worlds", fmt.Sprint(rp.Worlds), fmt.Sprint(mine.Worlds)},
		{"profiles", fmt.Sprint(rp.Profiles), fmt.Sprint(mine.Profiles)},
		{"targets", fmt.Sprint(rp.Engines), fmt.Sprint(mine.Engines)},
		{"interleave", interleaveString(rp.Interleave), interleaveString(mine.Interleave)},
	} {
		if s.old != s.new {
			return fmt.Errorf("the earlier sweep ran with %s %v, this one with %v (resume with the same -f file and flags)", s.name, s.old, s.new)
		}
	}
	return nil
}

// resultsPlan is the plan as the results file records it.
func (p *Plan) resultsPlan() results.PlanRecord {
	rp := results.PlanRecord{
		Branches: p.Branches, Worlds: p.Worlds, Profiles: p.Profiles,
		Reps: p.Reps, Warmup: p.Warmup, Pace: p.Pace, Rate: p.Rate,
		CellTimeoutMS: p.CellTimeout.Milliseconds(), StallThresholdMS: p.StallThreshold.Milliseconds(),
		Seed: p.Seed, Targets: p.Objectives, Spans: spansRecord(p.Spans),
		WorldOptions: results.WorldOptions{Guard: p.Guard, RetryStyle: string(p.RetryStyle),
			VisibilityTimeoutMS: p.VisibilityTimeout.Milliseconds()},
	}
	if !p.resolved.pacer.Open() {
		rp.Concurrency = p.Concurrency
	}
	if p.External.Enabled() {
		rp.Workers, rp.ExpectWorkers = p.External.Workers, p.External.Expect
	}
	for _, s := range p.Scenarios {
		rp.Scenarios = append(rp.Scenarios, s.Name)
	}
	if len(p.Options) > 0 || p.Faults != "" {
		rp.Options = map[string]string{}
		for k, v := range p.Options {
			rp.Options[k] = joinComma(v)
		}
		for _, s := range p.Scenarios {
			for k, v := range s.Options {
				rp.Options[s.Name+"."+k] = joinComma(v)
			}
		}
		if p.Faults != "" {
			rp.Options["faults"] = p.Faults
		}
	}
	if len(p.foreignTargets()) > 0 {
		for _, t := range p.Targets {
			rp.Engines = append(rp.Engines, t.String())
		}
	}
	for _, v := range p.Versions {
		rp.Versions = append(rp.Versions, results.VersionSpec{Name: v.Name, Features: featureMap(v)})
	}
	for _, s := range p.Switches {
		rp.Switches = append(rp.Switches, s.String())
	}
	p.recordWorldSettings(&rp.WorldOptions)
	if p.resolved != nil {
		rp.Interleave = p.resolved.interleave
	}
	return rp
}

func versionNames(vs []results.VersionSpec) string {
	n := make([]string, len(vs))
	for i, v := range vs {
		n[i] = v.Name + fmt.Sprint(v.Features)
	}
	return fmt.Sprint(n)
}
