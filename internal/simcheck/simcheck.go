// Package simcheck explores the engine on the sim world: for every seed, log
// model, scenario program and engine version it runs one workflow on a fresh
// deterministic world, checks invariants derived from the run's event log and
// the engine's Observer data, and reports per log model "N fail of M" with
// each failure's seed, violated invariant and a replayable trace.
//
// A failure replays exactly: the same Case on the same Config gives the
// same trace, byte for byte (Replay).
package simcheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/sim"
)

// Scenario is a workflow program the explorer runs.
type Scenario struct {
	Name    string
	Program engine.Program
}

// DefaultScenarios are small programs whose stages have several last
// completers racing, plus a sequence (one completer per stage).
func DefaultScenarios() []Scenario {
	return []Scenario{
		{"fanout-2", engine.FanOut(2)},
		{"fanout-8", engine.FanOut(8)},
		{"fanout-32", engine.FanOut(32)},
		{"stages-3x4", engine.Program{Stages: []engine.Stage{
			{Kind: engine.StageSteps, Steps: 4}, {Kind: engine.StageSteps, Steps: 4}, {Kind: engine.StageSteps, Steps: 4}}}},
		{"sequence-4", engine.Sequence(4)},
		{"race-8", engine.Program{Stages: []engine.Stage{{Kind: engine.StageSteps, Steps: 8, Race: true}, {Kind: engine.StageSteps, Steps: 1}}}},
	}
}

// LookupScenario returns the default scenario with that name.
func LookupScenario(name string) (Scenario, error) {
	var names []string
	for _, s := range DefaultScenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("simcheck: unknown scenario %q (known: %s)", name, strings.Join(names, ", "))
}

// JitterLatency is the explorer's default latency: every world call takes
// 1 to 20 ms, uniformly, so concurrent calls overtake each other.
func JitterLatency(op world.Op, rng *rand.Rand) time.Duration {
	return time.Millisecond + time.Duration(rng.Int63n(int64(19*time.Millisecond)+1))
}

// Config is an exploration.
type Config struct {
	// Seeds is how many seeds to run, from FirstSeed on (default 20, from 1).
	Seeds     int
	FirstSeed int64
	// Logs are the log models (default both, mint-ordered first).
	Logs []sim.LogModel
	// Scenarios default to DefaultScenarios.
	Scenarios []Scenario
	// Versions default to engine.DefaultVersions().
	Versions []engine.Version
	// Options are the world options (guard, retry style, visibility timeout).
	Options world.Options
	// Latency defaults to JitterLatency.
	Latency sim.LatencyFunc
	// PendingAtCommit is passed to the sim world (sim.Config).
	PendingAtCommit bool
	// Wrap, when set, decorates each case's sim world (e.g. with a latency
	// and fault profile, world/profile.Wrap); the engine runs on the result.
	Wrap func(w world.World, seed int64) world.World
	// FaultInjected tells the stall invariant that Wrap or Latency inject
	// faults, so waits up to the visibility timeout are expected.
	FaultInjected bool
	// Timeout is the virtual time a run may take before it is declared
	// lost (default 3 × the visibility timeout).
	Timeout time.Duration
	// TraceDir, when set, receives one trace file per failure (per case
	// with TraceAll).
	TraceDir string
	TraceAll bool
	// Parallel is how many cases run at once (each on its own world;
	// default 1).
	Parallel int
}

func (c Config) withDefaults() Config {
	if c.Seeds <= 0 {
		c.Seeds = 20
	}
	if c.FirstSeed == 0 {
		c.FirstSeed = 1
	}
	if len(c.Logs) == 0 {
		c.Logs = []sim.LogModel{sim.MintOrdered, sim.AppendOnly}
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = DefaultScenarios()
	}
	if len(c.Versions) == 0 {
		c.Versions = engine.DefaultVersions()
	}
	c.Options = c.Options.WithDefaults()
	if c.Latency == nil {
		c.Latency = JitterLatency
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * c.Options.VisibilityTimeout
	}
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	return c
}

// Case is one run of the exploration.
type Case struct {
	Seed     int64
	Log      sim.LogModel
	Scenario string
	Version  string
}

func (c Case) String() string {
	return fmt.Sprintf("seed=%d log=%s scenario=%s version=%s", c.Seed, c.Log, c.Scenario, c.Version)
}

// fileName is the case's trace file name.
func (c Case) fileName() string {
	return fmt.Sprintf("%s-%s-%s-seed%d.trace", c.Log, c.Scenario, c.Version, c.Seed)
}

// Result is the outcome of one case.
type Result struct {
	Case
	// Finished is set when the engine reported the run's end; TTC is then
	// the virtual time from the run's start.
	Finished bool
	TTC      time.Duration
	// Skew is the latest first body start of a step minus the earliest
	// (first attempts only), in virtual time.
	Skew time.Duration
	// Violations are the invariants the run broke (none: it passed).
	Violations []Violation
	// Trace is the run's trace when one was recorded; TracePath the file it
	// was written to.
	Trace     *sim.Trace
	TracePath string
}

// Failed reports whether the case broke an invariant.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// ModelReport is the exploration's outcome on one log model.
type ModelReport struct {
	Log   sim.LogModel
	Total int
	// Failures are the failing cases, with their traces when
	// Config.TraceDir is set.
	Failures []Result
	// Results are every case's outcome, in case order, without traces.
	Results []Result
}

// Report is an exploration's outcome, per log model in Config order.
type Report struct {
	Models []ModelReport
}

// Failed is the number of failing cases over every model.
func (r Report) Failed() int {
	n := 0
	for _, m := range r.Models {
		n += len(m.Failures)
	}
	return n
}

// Explore runs every case of cfg and checks its invariants. Traces are
// recorded only for failing cases (a failing case is replayed with its
// trace on), so the sweep itself runs at full speed.
func Explore(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	var cases []Case
	for _, log := range cfg.Logs {
		for _, sc := range cfg.Scenarios {
			for _, v := range cfg.Versions {
				for i := range cfg.Seeds {
					cases = append(cases, Case{Seed: cfg.FirstSeed + int64(i), Log: log, Scenario: sc.Name, Version: v.Name})
				}
			}
		}
	}
	results := make([]Result, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	next := make(chan int)
	for range cfg.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = runCase(ctx, cfg, cases[i], false)
			}
		}()
	}
	for i := range cases {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return Report{}, err
	}
	var rep Report
	for _, log := range cfg.Logs {
		m := ModelReport{Log: log}
		for i, r := range results {
			if cases[i].Log != log {
				continue
			}
			m.Total++
			if cfg.TraceDir != "" && (cfg.TraceAll || r.Failed()) {
				full, err := Replay(ctx, cfg, r.Case)
				if err != nil {
					return rep, err
				}
				r = full
				r.Trace = nil // on disk now; keep the report small
			}
			m.Results = append(m.Results, r)
			if r.Failed() {
				m.Failures = append(m.Failures, r)
			}
		}
		rep.Models = append(rep.Models, m)
	}
	return rep, nil
}

// Replay runs one case again with its trace recorded, and writes the trace
// to cfg.TraceDir when set. It reproduces an Explore result exactly.
func Replay(ctx context.Context, cfg Config, c Case) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	r, err := runCase(ctx, cfg, c, true)
	if err != nil {
		return r, err
	}
	if cfg.TraceDir != "" {
		if err := os.MkdirAll(cfg.TraceDir, 0o755); err != nil {
			return r, fmt.Errorf("simcheck: trace dir: %w", err)
		}
		path := filepath.Join(cfg.TraceDir, c.fileName())
		f, err := os.Create(path)
		if err != nil {
			return r, fmt.Errorf("simcheck: %w", err)
		}
		if _, err := r.Trace.WriteTo(f); err != nil {
			f.Close()
			return r, fmt.Errorf("simcheck: write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return r, fmt.Errorf("simcheck: write %s: %w", path, err)
		}
		r.TracePath = path
	}
	return r, nil
}

func (c Config) validate() error {
	for _, v := range c.Versions {
		if err := v.Features.Validate(); err != nil {
			return fmt.Errorf("simcheck: version %s: %w", v.Name, err)
		}
	}
	for _, s := range c.Scenarios {
		if err := s.Program.Validate(); err != nil {
			return fmt.Errorf("simcheck: scenario %s: %w", s.Name, err)
		}
	}
	return nil
}

func (c Config) scenario(name string) (Scenario, error) {
	for _, s := range c.Scenarios {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("simcheck: scenario %q is not in the config", name)
}

func (c Config) version(name string) (engine.Version, error) {
	for _, v := range c.Versions {
		if v.Name == name {
			return v, nil
		}
	}
	return engine.Version{}, fmt.Errorf("simcheck: version %q is not in the config", name)
}

// runID is the id of the single run of every case.
const runID = "run-1"

// settle is how long a case goes on after the run finished, so late writes
// of other tasks land before the log is checked.
const settle = time.Second

// runCase runs one workflow on a fresh sim world and checks it.
func runCase(ctx context.Context, cfg Config, c Case, trace bool) (Result, error) {
	sc, err := cfg.scenario(c.Scenario)
	if err != nil {
		return Result{}, err
	}
	v, err := cfg.version(c.Version)
	if err != nil {
		return Result{}, err
	}
	res := Result{Case: c}
	var tr *sim.Trace
	if trace {
		tr = sim.NewTrace()
		tr.Note("simcheck case: %s", c)
		tr.Note("version %s: %s", v.Name, v.Features)
		tr.Note("program: %s", describe(sc.Program))
		tr.Note("replay: durabench sim --replay %d --log %s --scenario %s --versions %s", c.Seed, c.Log, c.Scenario, c.Version)
		res.Trace = tr
	}
	w := sim.New(sim.Config{Options: cfg.Options, Log: c.Log, Seed: c.Seed, Latency: cfg.Latency, Trace: tr,
		PendingAtCommit: cfg.PendingAtCommit})
	defer w.Close()
	var ew world.World = w
	if cfg.Wrap != nil {
		ew = cfg.Wrap(w, c.Seed)
	}
	obs := newObserver(w.Runtime())
	eng, err := engine.New(engine.Config{World: ew, Features: v.Features, Observer: obs, Seed: c.Seed})
	if err != nil {
		return res, fmt.Errorf("simcheck: %s: %w", c, err)
	}
	var events []world.Event
	var runErr error
	var t0 time.Duration
	err = w.Run(ctx, func(ctx context.Context) {
		if runErr = eng.Start(ctx); runErr != nil {
			return
		}
		t0 = w.Now()
		if runErr = eng.StartRun(ctx, runID, sc.Program); runErr != nil {
			return
		}
		obs.done.Wait(ctx, cfg.Timeout)
		_ = w.Runtime().Sleep(ctx, settle)
		events, runErr = w.Load(ctx, runID)
	})
	if err == nil {
		err = runErr
	}
	if err != nil {
		return res, fmt.Errorf("simcheck: %s: %w", c, err)
	}
	if obs.finished {
		res.Finished = true
		res.TTC = obs.at - t0
	}
	if obs.starts > 0 {
		res.Skew = obs.lastStart - obs.firstStart
	}
	res.Violations = check(sc.Program, events, obs, checkLimits{
		stall: cfg.Options.VisibilityTimeout, faults: cfg.FaultInjected, t0: t0})
	if tr != nil {
		for _, v := range res.Violations {
			tr.Note("VIOLATION %s: %s", v.Invariant, v.Detail)
		}
	}
	return res, nil
}

func describe(p engine.Program) string {
	parts := make([]string, len(p.Stages))
	for i, s := range p.Stages {
		parts[i] = fmt.Sprintf("%s(%d)", s.Kind, s.Steps)
	}
	return strings.Join(parts, " → ")
}

// observer collects what the engine reports for one run. The sim world runs
// one task at a time, so no lock is needed; it is kept for the Observer
// contract (safe for concurrent use).
type observer struct {
	mu     sync.Mutex
	bodies map[string]int // "stage.index" -> body executions
	// firstStart and lastStart bound the first body start of every step.
	firstStart, lastStart time.Duration
	starts                int
	done                  world.Future
	finished              bool
	failed                bool
	at                    time.Duration
	ends                  int
}

func newObserver(rt world.Runtime) *observer {
	return &observer{bodies: map[string]int{}, done: rt.NewFuture()}
}

func (o *observer) StepBody(run string, s engine.StepSpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := stepKey(s.Stage, s.Index)
	o.bodies[key]++
	if o.bodies[key] > 1 {
		return
	}
	if o.starts == 0 || s.Start < o.firstStart {
		o.firstStart = s.Start
	}
	o.lastStart = max(o.lastStart, s.Start)
	o.starts++
}

func (o *observer) HookCreated(string, string, time.Duration) {}
func (o *observer) StreamChunk(string, engine.ChunkSpan)      {}

func (o *observer) RunFinished(run string, at time.Duration, failed bool) {
	o.mu.Lock()
	o.ends++
	if !o.finished {
		o.finished, o.failed, o.at = true, failed, at
	}
	o.mu.Unlock()
	o.done.Resolve()
}
