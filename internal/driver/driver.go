// Package driver runs one cell of a sweep: it starts an engine on a world,
// executes warm-up runs (discarded) and measured runs under a Pacer, waits
// for them through the Observer, records runs still unfinished at the cell
// timeout as stalls, and hands the timelines on to become a results.Cell.
//
// The driver reads the clock, sleeps, spawns tasks and waits only through
// the world's Runtime, so the same cell runs in real time on mem and nats
// and in virtual time on sim.
package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
)

// Defaults for Config fields left zero.
const (
	DefaultCellTimeout = 60 * time.Second
	DefaultGrace       = 5 * time.Second
)

// ErrStart is returned when not a single measured run could be started: the
// world or the engine is broken, not slow.
var ErrStart = errors.New("no run could be started")

// Config is one cell to run.
type Config struct {
	World    world.World
	Features engine.Features
	Program  engine.Program
	// RunPrefix starts every run id: "<prefix>-w0001" for warm-ups,
	// "<prefix>-r0001" for measured runs. A hash of the cell key makes ids
	// deterministic and unique across cells.
	RunPrefix string
	Reps      int
	Warmup    int
	Pacer     Pacer
	// CellTimeout bounds each phase (warm-up, measured); runs unfinished by
	// then are stalls.
	CellTimeout time.Duration
	// Grace is how long runs in flight may finish after an interruption.
	Grace time.Duration
	// EngineConcurrency is the engine's delivery concurrency (0: engine
	// default).
	EngineConcurrency int
	Seed              int64
	// External, when set, runs the engine on workers elsewhere: the
	// driver's engine only starts runs (see External).
	External External
	// Target, when set, is the engine under test: the driver starts runs
	// and resumes hooks through it and hosts no engine (see Target). The
	// World then only supplies the driver's clock.
	Target Target
	// CoarsePacing turns precise waiting off: the driver sleeps on the
	// world's runtime until each run's schedule, which on Linux returns
	// about 1 ms late for any sleep under 1 ms (see Calibration). It exists
	// to measure what precise pacing costs.
	CoarsePacing bool
	// Turn, when set, takes turns with other cells' drivers (an
	// interleaved sweep): the pacing task waits for each run's turn before
	// scheduling it, and tells it when the run ended (see Turn). Real-time
	// worlds only: it waits on the wall clock, outside the world's runtime.
	Turn Turn
	// NoSpans records no spans (sweep --spans off): the engine gets an
	// observer that takes none, so it neither wraps its world nor reads
	// the clock more, external workers are told so, spans reported all the
	// same are dropped, and the runs have no critical path.
	NoSpans bool
	// OnRun, when set, is called after every run finished (warm-ups too),
	// from the engine's task, and at the end of each phase once per run it
	// gave up (unfinished at the timeout): it must not block.
	OnRun func(p CellProgress)
}

// CellProgress reports how far a cell is; Config.OnRun receives one after
// every finished run and, at the end of a phase, one for each run the
// phase gave up.
type CellProgress struct {
	Warmup bool
	// Done counts the phase's finished runs, Total its planned runs and
	// Started those started so far (Started − Done are in flight).
	Done, Total, Started int
	// Run is the run the report is about, as recorded: finished, or given
	// up at the phase's end (Finished false, Cut set). Read it, never
	// change it: it may share its slices with the cell's Result.
	Run *metrics.RunTimeline
}

// Finished reports whether p is about a run that finished (not one given
// up at the phase's end).
func (p CellProgress) Finished() bool { return p.Run == nil || p.Run.Finished }

// Result is what one cell produced.
type Result struct {
	// Timelines are the measured runs in run order; a run unfinished at the
	// timeout is cut there (Finished false). Runs never started are absent.
	Timelines []metrics.RunTimeline
	// Unstarted lists measured run ids the driver never got to start before
	// the timeout (closed or burst pacing behind stalled runs).
	Unstarted []string
	// Lag is actual − scheduled start of each started measured run, in run
	// order (meaningful for open pacing only, see Pacer.Open).
	Lag []time.Duration
	// Elapsed is the measured phase's duration.
	Elapsed time.Duration
	// TimedOut is set when the measured phase hit the cell timeout.
	TimedOut bool
	// Interrupted is set when ctx was cancelled before every measured run
	// finished: the cell is incomplete and must not be reported.
	Interrupted bool
}

// Run runs the cell. Cancelling ctx interrupts it: no new run starts, runs in
// flight get cfg.Grace to finish, and the Result says Interrupted unless
// every measured run finished anyway. Errors are about the cell's set-up
// (engine, world), never about individual runs, which are recorded.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.World == nil || cfg.Pacer == nil {
		return nil, fmt.Errorf("driver: config needs a world and a pacer")
	}
	if cfg.Reps < 1 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("driver: reps %d, warmup %d", cfg.Reps, cfg.Warmup)
	}
	if cfg.CellTimeout <= 0 {
		cfg.CellTimeout = DefaultCellTimeout
	}
	if cfg.Turn != nil && cfg.World.Capabilities().VirtualTime {
		return nil, fmt.Errorf("driver: turns are taken in real time; the world's clock is virtual")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	rec := metrics.NewRecorder()
	hooks := NewHookResumer(rec, cfg.World.Runtime()) // resumes hooks as soon as they exist
	hooks.noSpans = cfg.NoSpans
	// Runs and the engine keep working through an interruption (grace);
	// they stop when the cell is over.
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	starter, err := startEngine(ctx, runCtx, cfg, hooks, rec)
	if err != nil {
		return nil, err
	}
	defer starter.stop()

	rt := cfg.World.Runtime()
	realTime := !cfg.World.Capabilities().VirtualTime
	sender, _ := starter.runs.(startSender)
	d := &cellRun{cfg: cfg, rt: rt, rec: rec, eng: starter.runs, sender: sender, runCtx: runCtx, inline: sendsOnly(starter.runs),
		wait: newWaiter(rt, realTime && !cfg.CoarsePacing, cfg.External != nil || !inProcess(cfg.Target)), realTime: realTime}
	if a, ok := starter.runs.(aheadStarter); ok && a.StartsAt() && d.inline && realTime && !cfg.CoarsePacing {
		d.ahead, d.aheadBy = a, a.StartAhead()
	}
	defer d.wait.release()
	res := &Result{}
	if cfg.Warmup > 0 {
		w := d.phase(ctx, "w", cfg.Warmup, true)
		if w.interrupted {
			res.Interrupted = true
			return res, nil
		}
	}
	m := d.phase(ctx, "r", cfg.Reps, false)
	res.Timelines, res.Unstarted, res.Lag = m.timelines, m.unstarted, m.lag
	res.Elapsed, res.TimedOut, res.Interrupted = m.elapsed, m.timedOut, m.interrupted
	if len(m.lag) == 0 && !m.interrupted {
		return res, fmt.Errorf("driver: %w", ErrStart)
	}
	// Every run failing before a single step body ran is a broken world or
	// engine (a dead server), not a measurement.
	broken := len(res.Timelines) > 0 && len(res.Unstarted) == 0
	for _, tl := range res.Timelines {
		if !tl.Failed || len(tl.Steps) > 0 {
			broken = false
			break
		}
	}
	if broken {
		return res, fmt.Errorf("driver: every run failed, first: %s: %w", res.Timelines[0].Error, ErrStart)
	}
	return res, nil
}

// inProcess reports whether t (nil: the driver's own engine) runs in this
// process: a Target says so with an InProcess method that returns true;
// any other is taken to run in another process.
func inProcess(t Target) bool {
	if t == nil {
		return true
	}
	p, ok := t.(interface{ InProcess() bool })
	return ok && p.InProcess()
}

// startSender is a Target whose StartRun may hold a start before sending
// it (a session's batch starts wait for a free sender): StartSent reports,
// once StartRun returned, when run id's start left the driver (the
// driver's clock); false when it went out as StartRun was called.
type startSender interface {
	StartSent(id string) (time.Duration, bool)
}

// aheadStarter is a Target that can send a run's start ahead of its
// schedule for the target to hold until then (a target.Session on a 1.3
// target's stream): StartRunAt is called StartAhead before the schedule,
// and the run starts on the target at its schedule, the start's way over
// the wire (and the wake-up of the target's reader) then outside the
// run's times. The pacer does so in real time, for the runs aheadFor
// picks: the target spins out what is left of the lead, and at higher
// rates that spin would take the cores the runs in flight use (whose
// target is awake anyway).
type aheadStarter interface {
	StartsAt() bool
	StartAhead() time.Duration
	StartRunAt(ctx context.Context, id string, p engine.Program, at time.Duration) error
}

// aheadShare: runs closer than aheadShare × StartAhead apart are started
// at their schedule (the pacer's spin window has the same bound, from
// the same concern: outsideSpinShare).
const aheadShare = outsideSpinShare

// aheadFor is how long before run i's schedule its start is sent (gap:
// from the previous run's schedule; inflight: the runs in flight), 0 for
// a start sent at its schedule: with open pacing, for the first run and
// runs at least aheadShare × StartAhead apart; with any other pacer (a
// run starts as a slot frees: no schedule known ahead), for a run that
// starts with none in flight — the target is idle then, its cores likely
// asleep (the wake-up a start sent ahead keeps out of the run), and its
// spin takes nothing from the runs in flight.
func (d *cellRun) aheadFor(i int, gap time.Duration, inflight int) time.Duration {
	switch {
	case d.ahead == nil:
		return 0
	case d.cfg.Pacer.Open() && (i == 0 || gap >= aheadShare*d.aheadBy):
		return d.aheadBy
	case !d.cfg.Pacer.Open() && inflight == 0:
		return d.aheadBy
	}
	return 0
}

// sendsOnly reports whether t's StartRun only sends the start and returns
// (a session on a target's stream: the start's answer and the run's
// events come later): a Target says so with a SendsOnly method that
// returns true. The pacer then starts each run itself, on its schedule,
// with no hand-off to a starter goroutine.
func sendsOnly(t any) bool {
	p, ok := t.(interface{ SendsOnly() bool })
	return ok && p.SendsOnly()
}

// runStarter is what starts a cell's runs (the driver's engine, or a
// target), and how to stop what startEngine started.
type runStarter struct {
	runs interface {
		StartRun(ctx context.Context, id string, p engine.Program) error
	}
	stop func()
}

// startEngine starts the cell's engine: a target's session (no engine
// here), or the driver's engine — consuming, or only starting runs for
// external workers whose records it attaches.
func startEngine(ctx, runCtx context.Context, cfg Config, hooks *HookResumer, rec *metrics.Recorder) (runStarter, error) {
	if cfg.Target != nil {
		hooks.Bind(runCtx, cfg.Target)
		detach, err := cfg.Target.Attach(runCtx, hooks, rec.Fail)
		if err != nil {
			return runStarter{}, fmt.Errorf("driver: %w", err)
		}
		return runStarter{runs: cfg.Target, stop: detach}, nil
	}
	obs := hooks.engineObserver()
	eng, err := engine.New(engine.Config{World: cfg.World, Features: cfg.Features, Observer: obs,
		Concurrency: cfg.EngineConcurrency, Seed: cfg.Seed})
	if err != nil {
		return runStarter{}, fmt.Errorf("driver: %w", err)
	}
	hooks.Bind(runCtx, eng)
	detach := func() {}
	if cfg.External != nil {
		if detach, err = cfg.External.Attach(runCtx, obs); err != nil {
			return runStarter{}, fmt.Errorf("driver: %w", err)
		}
	} else if err := eng.Start(runCtx); err != nil {
		return runStarter{}, fmt.Errorf("driver: %w", err)
	}
	return runStarter{runs: eng, stop: func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Grace)
		defer cancel()
		_ = eng.Stop(stopCtx) // best effort: the cell's figures are already taken
		detach()
	}}, nil
}

type cellRun struct {
	cfg Config
	rt  world.Runtime
	rec *metrics.Recorder
	eng interface {
		StartRun(ctx context.Context, id string, p engine.Program) error
	}
	// sender is eng when it may hold starts back (nil otherwise).
	sender startSender
	// inline: eng's StartRun only sends (sendsOnly), and the pacer calls
	// it itself.
	inline bool
	// ahead is eng when the pacer sends starts aheadBy before their
	// schedule (aheadStarter; nil otherwise).
	ahead   aheadStarter
	aheadBy time.Duration
	runCtx  context.Context
	wait    *waiter
	// realTime is false on a virtual-time world (sim).
	realTime bool
}

// phaseState is shared between the pacing task, the runs' completion
// callbacks and the waiting task. Its mutex guards short critical sections
// only; every wait goes through Runtime futures.
type phaseState struct {
	mu       sync.Mutex
	inflight int
	started  int
	paced    bool // the pacing task returned
	changed  world.Future
	allDone  world.Future
	lag      []time.Duration
	// enough is set when the Turn ended the phase early (ErrEnough): the
	// runs not started are not the phase's.
	enough bool
}

// finishOne is a run's done callback.
func (s *phaseState) finishOne(rt world.Runtime) {
	s.mu.Lock()
	s.inflight--
	s.signalLocked(rt)
	s.mu.Unlock()
}

// signalLocked wakes the pacing task and, when nothing is left to wait for,
// the waiting task.
func (s *phaseState) signalLocked(rt world.Runtime) {
	s.changed.Resolve()
	s.changed = rt.NewFuture()
	if s.paced && s.inflight == 0 {
		s.allDone.Resolve()
	}
}

type phaseResult struct {
	timelines   []metrics.RunTimeline
	unstarted   []string
	lag         []time.Duration
	elapsed     time.Duration
	timedOut    bool
	interrupted bool
}

// phase runs n runs (ids RunPrefix-<tag>0001…) paced by the cell's pacer,
// waits for them until the cell timeout (or, interrupted, the grace) and
// returns their timelines.
func (d *cellRun) phase(ctx context.Context, tag string, n int, warmup bool) phaseResult {
	rt := d.rt
	ph := &phaseRun{d: d, warmup: warmup, n: n, ids: runIDs(d.cfg.RunPrefix, tag, n),
		st:    &phaseState{changed: rt.NewFuture(), allDone: rt.NewFuture(), lag: make([]time.Duration, n)},
		steps: d.cfg.Program.StepCount(), epoch: rt.Now(), timeout: d.cfg.CellTimeout}
	// paceCtx stops the pacing task at the timeout or on interruption.
	paceCtx, stopPacing := context.WithCancel(ctx)
	defer stopPacing()
	rt.Go(func() { ph.pace(paceCtx) })
	ph.wait(ctx, stopPacing)
	stopPacing()
	ph.doneMu.Lock()
	ph.over = true
	ph.doneMu.Unlock()
	if d.cfg.Turn != nil {
		d.cfg.Turn.End(warmup)
	}
	return ph.collect(ctx, rt.Now())
}

// runIDs are the run ids of a phase: prefix-<tag>0001 to prefix-<tag>n.
func runIDs(prefix, tag string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%s%04d", prefix, tag, i+1)
	}
	return ids
}

// phaseRun is one phase of a cell (its warm-up or its measured runs) while
// it runs: the pacing task, the runs' done callbacks and the waiting task
// share it.
type phaseRun struct {
	d      *cellRun
	warmup bool
	n      int
	ids    []string
	st     *phaseState
	steps  int
	// epoch is the phase's time 0 on the runtime's clock; runs are
	// scheduled from it, and the phase ends timeout after it.
	epoch, timeout time.Duration

	doneMu sync.Mutex
	// done counts the runs reported done; over is set once the phase
	// ended, so a run given up at the timeout that finishes late is not
	// reported.
	done int
	over bool
}

// runDone is a run's done callback: it reports the run, then counts it
// done. Counted first, the last run could end the phase (and the cell)
// before its report went out, and a progress consumer (the live metrics)
// lost it.
func (ph *phaseRun) runDone(i int, id string) {
	d, rt := ph.d, ph.d.rt
	if d.cfg.Turn != nil {
		// Last, once the run is reported and counted done: the other
		// cell's next run then starts beside nothing of this driver's.
		defer func() {
			tl, _ := d.rec.Snapshot(id, rt.Now())
			d.cfg.Turn.Done(ph.warmup, i, tl)
		}()
	}
	defer ph.st.finishOne(rt)
	if d.cfg.OnRun == nil {
		return
	}
	ph.doneMu.Lock()
	if ph.over {
		// A run given up at the timeout that finishes late must not
		// count towards the next phase or cell.
		ph.doneMu.Unlock()
		return
	}
	ph.done++
	p := CellProgress{Warmup: ph.warmup, Done: ph.done, Total: ph.n}
	ph.doneMu.Unlock()
	ph.st.mu.Lock()
	p.Started = ph.st.started
	ph.st.mu.Unlock()
	if tl, ok := d.rec.Snapshot(id, rt.Now()); ok {
		p.Run = &tl
	}
	d.cfg.OnRun(p)
}

// pace is the pacing task: it schedules the phase's runs one by one with
// the pacer and hands each to a starter, until every run started, the
// phase's timeout, or ctx ends.
func (ph *phaseRun) pace(ctx context.Context) {
	d, rt, st := ph.d, ph.d.rt, ph.st
	starters := newStarters(rt, d.realTime)
	defer starters.close()
	defer func() {
		st.mu.Lock()
		st.paced = true
		st.signalLocked(rt)
		st.mu.Unlock()
	}()
	var prevAt time.Duration // the previous run's schedule
	// Open pacing in real time hands each run to its starter a lead before
	// its schedule and waits for the starter to resume it (see waiter).
	early := d.wait.precise() && d.cfg.Pacer.Open() && !d.inline
	resume := make(chan time.Duration, 1) // the starter's clock when it ran
	for i := 0; i < ph.n; i++ {
		if d.cfg.Turn != nil && !ph.takeTurn(ctx, i) {
			return
		}
		at, ahead, ok := ph.schedule(ctx, i, prevAt, early)
		if !ok {
			return
		}
		prevAt = at
		sched := ph.epoch + at
		// The anchor t0 is the schedule, registered before StartRun.
		id := ph.ids[i]
		if err := d.rec.Begin(id, sched, ph.steps, func() { ph.runDone(i, id) }); err != nil {
			return // a duplicate id is a driver bug; stop pacing
		}
		st.mu.Lock()
		st.inflight++
		st.started++
		st.mu.Unlock()
		handed := rt.Now()
		start := func() { ph.start(i, id, sched, early, ahead, resume) }
		if d.inline {
			start()
			continue
		}
		starters.start(start)
		if early {
			d.wait.handedOff(<-resume - handed)
		}
	}
}

// schedule waits until run i is due to be handed off (a lead before its
// schedule when early) and returns its schedule from the epoch; ok is false
// when it is not to start: ctx ended, or the phase's timeout came first.
func (ph *phaseRun) schedule(ctx context.Context, i int, prevAt time.Duration, early bool) (at time.Duration, ahead, ok bool) {
	d, rt, st := ph.d, ph.d.rt, ph.st
	for {
		if ctx.Err() != nil {
			return 0, false, false
		}
		now := rt.Now() - ph.epoch
		if now >= ph.timeout {
			return 0, false, false
		}
		st.mu.Lock()
		inflight, changed := st.inflight, st.changed
		st.mu.Unlock()
		var block bool
		at, block = d.cfg.Pacer.Pace(now, i, inflight)
		if block {
			changed.Wait(ctx, ph.timeout-now)
			continue
		}
		if at >= ph.timeout {
			return 0, false, false // scheduled after the phase's end
		}
		gap, lead := time.Duration(0), time.Duration(0)
		if i > 0 {
			gap = at - prevAt
		}
		if early {
			lead = d.wait.leadFor(gap)
		}
		a := d.aheadFor(i, gap, inflight)
		if a > 0 {
			lead = a
			if !d.cfg.Pacer.Open() {
				// Started as a slot frees (no schedule of its own
				// ahead): scheduled a lead from now, its start sent now.
				at = max(at, now) + a
			}
		}
		if at-lead > now {
			d.wait.until(ctx, ph.epoch+at-lead, gap)
			continue
		}
		return at, a > 0, true
	}
}

// start starts run i (id) scheduled at sched, on its starter, and records
// its driver lag: when early, it first tells the pacer it runs and spins
// out the rest of the lead; when ahead, it sends the start now for the
// target to hold until sched.
func (ph *phaseRun) start(i int, id string, sched time.Duration, early, ahead bool, resume chan<- time.Duration) {
	d, rt, st := ph.d, ph.d.rt, ph.st
	actual := rt.Now()
	switch {
	case ahead:
		// Sent ahead for the target to hold until sched (aheadStarter):
		// late only if it leaves after sched; a start that comes late
		// starts there at once, its delay then in the run's start.
		actual = max(actual, sched)
	case early:
		resume <- actual
		for actual < sched { // the rest of the lead
			actual = rt.Now()
		}
	}
	st.mu.Lock()
	st.lag[i] = actual - sched
	st.mu.Unlock()
	d.rec.Started(id, actual)
	var err error
	if ahead {
		err = d.ahead.StartRunAt(d.runCtx, id, d.cfg.Program, sched)
	} else {
		err = d.eng.StartRun(d.runCtx, id, d.cfg.Program)
	}
	if err != nil {
		d.rec.Fail(id, rt.Now(), err)
		return
	}
	if d.sender != nil {
		if sent, ok := d.sender.StartSent(id); ok && sent > actual {
			// The start waited in the target session's queue: the run
			// started when it was sent.
			st.mu.Lock()
			st.lag[i] = sent - sched
			st.mu.Unlock()
			d.rec.Started(id, sent)
		}
	}
}

// wait waits until every started run is done or the phase's timeout;
// interrupted (ctx ended), it stops the pacing and gives the runs in
// flight the grace period, within the timeout.
func (ph *phaseRun) wait(ctx context.Context, stopPacing func()) {
	rt := ph.d.rt
	deadline := ph.epoch + ph.timeout
	if left := deadline - rt.Now(); left > 0 && !ph.st.allDone.Wait(ctx, left) {
		if ctx.Err() != nil {
			stopPacing()
			if left := deadline - rt.Now(); left > 0 {
				ph.st.allDone.Wait(context.WithoutCancel(ctx), min(ph.d.cfg.Grace, left))
			}
		}
	}
}

// collect is the phase's result at end: every run's timeline (a run not
// finished is reported once more, cut), the runs never started, the lags.
func (ph *phaseRun) collect(ctx context.Context, end time.Duration) phaseResult {
	d := ph.d
	r := phaseResult{elapsed: end - ph.epoch}
	ph.st.mu.Lock()
	started, enough := ph.st.started, ph.st.enough
	r.lag = append([]time.Duration(nil), ph.st.lag[:started]...)
	ph.st.mu.Unlock()
	complete := true
	for i, id := range ph.ids {
		if i >= started && enough {
			break // the Turn ended the phase: these were never its runs
		}
		if i >= started {
			r.unstarted = append(r.unstarted, id)
			complete = false
			continue
		}
		tl, _ := d.rec.Snapshot(id, end)
		if !tl.Finished {
			complete = false
			if d.cfg.OnRun != nil {
				cut := tl
				d.cfg.OnRun(CellProgress{Warmup: ph.warmup, Done: ph.done, Total: ph.n, Started: started, Run: &cut})
			}
		}
		r.timelines = append(r.timelines, tl)
	}
	if !complete {
		if ctx.Err() != nil {
			r.interrupted = true
		} else {
			r.timedOut = true
		}
	}
	return r
}
