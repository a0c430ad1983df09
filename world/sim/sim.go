// Package sim is the deterministic virtual-time world: the world contract
// and the Runtime the engine runs on, simulated by a scheduler that runs
// exactly one task at a time and advances a virtual clock to the next event
// in (time, sequence) order.
//
// Every task is a goroutine, but only the task holding the baton runs. A task
// that sleeps, waits on a group, future or semaphore, or makes any world call
// parks; the scheduler then resumes the next task. A world call completes at
// now + Config.Latency(op), drawn from a seeded RNG, so a seed replays the
// same interleaving, the same positions and the same numbers.
//
// Two event-log models are simulated. Append-only assigns an event's
// position when the append commits, at the end of its latency. Mint-ordered
// mints the position when the append is issued and commits it after the
// latency: Load returns only committed events, so a reader can see position
// 11 while 10 is still in flight, and 10 lands behind a position the reader
// already passed.
//
// The engine code is the same on every world; nothing in it knows it runs
// here.
package sim

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"time"

	"github.com/durabench/durabench/world"
)

// LogModel is how the simulated event log assigns positions.
type LogModel string

const (
	// AppendOnly assigns the position at commit: positions are committed in
	// order, and a reader never misses an event behind one it saw.
	AppendOnly LogModel = "append-only"
	// MintOrdered mints the position when the append is issued, before its
	// commit latency: a write can land behind a position a reader already
	// passed.
	MintOrdered LogModel = "mint-ordered"
)

// ParseLogModel returns the model named s.
func ParseLogModel(s string) (LogModel, error) {
	switch LogModel(s) {
	case AppendOnly, MintOrdered:
		return LogModel(s), nil
	}
	return "", fmt.Errorf("sim: unknown log model %q (known: %s, %s)", s, AppendOnly, MintOrdered)
}

// LatencyFunc draws the latency of one world call.
type LatencyFunc func(op world.Op, rng *rand.Rand) time.Duration

// DefaultLatency is 1 ms for every call: each world call is a scheduling
// point and virtual time moves.
const DefaultLatency = time.Millisecond

// DefaultRunLimit bounds the virtual time of one Run.
const DefaultRunLimit = 24 * time.Hour

// Config configures a sim world.
type Config struct {
	Options world.Options
	// Log is the event-log model (default AppendOnly).
	Log LogModel
	// Seed seeds the latency RNG (when zero, Options.Seed is used).
	Seed int64
	// Latency draws each world call's latency; nil means DefaultLatency.
	Latency LatencyFunc
	// Trace, when set, records every scheduled operation.
	Trace *Trace
	// RunLimit stops a Run whose virtual clock advanced this much
	// (default DefaultRunLimit; negative: no limit).
	RunLimit time.Duration
	// PendingAtCommit makes a mint-ordered log count AppendResult.Pending
	// over every event committed when the append commits (an atomic counter
	// on the run), instead of over the committed events at positions up to
	// the appended one. Append-only logs count the same either way.
	PendingAtCommit bool
}

// World is a simulated world. All of its methods, and those of its Runtime,
// must be called from tasks of the simulation (inside Run); a call made while
// no Run drives the world runs as a one-shot Run.
type World struct {
	cfg  Config
	opts world.Options
	s    *sched
	rng  *rand.Rand

	closed bool

	runs    map[string]*runState
	runIDs  []string
	hooks   map[string]string // token -> run
	q       queue
	streams map[string]*stream
}

var _ world.World = (*World)(nil)

// New returns a sim world.
func New(cfg Config) *World {
	if cfg.Log == "" {
		cfg.Log = AppendOnly
	}
	if cfg.Seed == 0 {
		cfg.Seed = cfg.Options.Seed
	}
	if cfg.RunLimit == 0 {
		cfg.RunLimit = DefaultRunLimit
	}
	w := &World{
		cfg:     cfg,
		opts:    cfg.Options.WithDefaults(),
		s:       newSched(cfg.Trace),
		rng:     rand.New(rand.NewSource(cfg.Seed)),
		runs:    map[string]*runState{},
		hooks:   map[string]string{},
		streams: map[string]*stream{},
	}
	w.q.w = w
	if cfg.Trace != nil {
		cfg.Trace.Note("sim world: log=%s seed=%d guard=%v retry=%s visibility=%v retry_delay=%v pending_at_commit=%v",
			cfg.Log, cfg.Seed, w.opts.Guard, w.opts.RetryStyle, w.opts.VisibilityTimeout, w.opts.RetryDelay, cfg.PendingAtCommit)
	}
	return w
}

// Name is "sim".
func (w *World) Name() string { return "sim" }

// Log is the world's log model.
func (w *World) Log() LogModel { return w.cfg.Log }

// Seed is the world's seed.
func (w *World) Seed() int64 { return w.cfg.Seed }

// Now is the virtual time.
func (w *World) Now() time.Duration { return w.s.now }

// Capabilities declares the guard, retry style and visibility timeout of the
// options, and virtual time.
func (w *World) Capabilities() world.Capabilities {
	return world.Capabilities{
		Guard:             w.opts.Guard,
		RetryStyle:        w.opts.RetryStyle,
		VisibilityTimeout: w.opts.VisibilityTimeout,
		VirtualTime:       true,
	}
}

// Runtime is the virtual-time scheduler.
func (w *World) Runtime() world.Runtime { return simRuntime{w} }

// Run runs fn as the root task and drives the simulation until fn returns.
// Other tasks (consumers, timers) stay parked when it returns and go on at
// the next Run; Close ends them. Run returns nil when fn returned, and
// ErrDeadlock, ErrTimeLimit (Config.RunLimit), ctx.Err() or ErrTaskPanic
// when the simulation stopped before. Called from inside a task, Run simply
// calls fn.
func (w *World) Run(ctx context.Context, fn func(ctx context.Context)) error {
	err := w.s.run(ctx, w.cfg.RunLimit, func() { fn(ctx) })
	if w.closed && !w.s.closing && !w.s.inTask() && !w.s.driving {
		w.s.shutdown() // Close was called inside the run
	}
	return err
}

// Close stops the consumers, ends every task and makes later calls fail
// with world.ErrClosed. Called from inside a task, it marks the world closed
// and the tasks end when the Run returns.
func (w *World) Close() error {
	if w.closed && w.s.closing {
		return nil
	}
	w.closed = true
	for _, sub := range w.q.subs {
		sub.stopped = true
	}
	if !w.s.inTask() && !w.s.driving {
		w.s.shutdown()
	}
	return nil
}

// outside runs call as a one-shot Run when the caller is not a task.
func outside[T any](w *World, ctx context.Context, call func(ctx context.Context) (T, error)) (T, error) {
	var v T
	var err error
	if rerr := w.Run(ctx, func(ctx context.Context) { v, err = call(ctx) }); rerr != nil {
		return v, rerr
	}
	return v, err
}

// enter checks ctx and the world before a call parks.
func (w *World) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.closed {
		return world.ErrClosed
	}
	return nil
}

// latency draws op's latency.
func (w *World) latency(op world.Op) time.Duration {
	if w.cfg.Latency == nil {
		return DefaultLatency
	}
	d := w.cfg.Latency(op, w.rng)
	if d < 0 {
		d = 0
	}
	return d
}

// await parks the calling task for op's latency; the call takes effect when
// it returns.
func (w *World) await(op world.Op) error {
	w.s.sleep(w.latency(op))
	if w.closed {
		return world.ErrClosed
	}
	return nil
}

// runState is one run and its log.
type runState struct {
	run world.Run
	// events are the committed events in position order.
	events  []world.Event
	lastPos int64 // highest committed position
	minted  int64 // mint-ordered: highest minted position
	ids     map[string]int64
	steps   map[string]*stepState
	pending int // steps created and not terminal, over all committed events
	hooks   map[string]bool
}

type stepState struct {
	created, terminal int64 // positions; 0 = none
}

// CreateRun stores r and commits its run_created event at position 1.
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	if !w.s.inTask() {
		_, err := outside(w, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, w.CreateRun(ctx, r) })
		return err
	}
	if err := w.enter(ctx); err != nil {
		return err
	}
	if err := w.await(world.OpCreateRun); err != nil {
		return err
	}
	if _, ok := w.runs[r.ID]; ok {
		w.s.record(string(world.OpCreateRun), r.ID, "conflict")
		return fmt.Errorf("sim: create run %s: %w", r.ID, world.ErrConflict)
	}
	r.Status = world.StatusPending
	rs := &runState{run: r, ids: map[string]int64{}, steps: map[string]*stepState{}, hooks: map[string]bool{}}
	rs.events = append(rs.events, world.Event{Pos: 1, Kind: world.RunCreated})
	rs.lastPos, rs.minted = 1, 1
	w.runs[r.ID] = rs
	w.runIDs = append(w.runIDs, r.ID)
	w.s.record(string(world.OpCreateRun), r.ID, "ok pos=1")
	return nil
}

// GetRun returns the run with its status derived from its committed events.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) (world.Run, error) { return w.GetRun(ctx, id) })
	}
	if err := w.enter(ctx); err != nil {
		return world.Run{}, err
	}
	if err := w.await(world.OpGetRun); err != nil {
		return world.Run{}, err
	}
	rs, ok := w.runs[id]
	if !ok {
		w.s.record(string(world.OpGetRun), id, "not found")
		return world.Run{}, fmt.Errorf("sim: run %s: %w", id, world.ErrNotFound)
	}
	w.s.record(string(world.OpGetRun), id, string(rs.run.Status))
	return rs.run, nil
}

// ListRuns returns the run ids in creation order.
func (w *World) ListRuns(ctx context.Context) ([]string, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) ([]string, error) { return w.ListRuns(ctx) })
	}
	if err := w.enter(ctx); err != nil {
		return nil, err
	}
	if err := w.await(world.OpListRuns); err != nil {
		return nil, err
	}
	w.s.record(string(world.OpListRuns), "", fmt.Sprintf("n=%d", len(w.runIDs)))
	return append([]string(nil), w.runIDs...), nil
}

// Append appends ev to run's log by the rules documented on world.Log. In
// the append-only model the position is assigned at commit; in the
// mint-ordered model it is minted now and committed after the latency (a
// rejected append leaves a gap).
func (w *World) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) (world.AppendResult, error) { return w.Append(ctx, run, ev, pre) })
	}
	if err := w.enter(ctx); err != nil {
		return world.AppendResult{}, err
	}
	var minted int64
	if rs, ok := w.runs[run]; ok && w.cfg.Log == MintOrdered {
		rs.minted++
		minted = rs.minted
	}
	issued := w.s.now
	if err := w.await(world.AppendOp(ev.Kind)); err != nil {
		return world.AppendResult{}, err
	}
	res, err := w.commit(run, ev, pre, minted)
	if rs, ok := w.runs[run]; ok && minted > 0 && minted == rs.minted && (err != nil || res.Duplicate) {
		// Nothing was minted after this rejected append: give the position
		// back, so sequential writers see dense positions. A position minted
		// behind later ones stays a gap, as in a real sequence.
		rs.minted--
	}
	if w.s.trace != nil {
		w.traceAppend(run, ev, pre, issued, minted, res, err)
	}
	return res, err
}

func (w *World) traceAppend(run string, ev world.Event, pre world.Precondition, issued time.Duration, minted int64, res world.AppendResult, err error) {
	d := fmt.Sprintf("%s issued=%.6fs", ev.Entity, issued.Seconds())
	if ev.ID != "" {
		d += " id=" + ev.ID
	}
	if pre.Guarded {
		d += fmt.Sprintf(" guard=%d", pre.LastPos)
	}
	if minted > 0 {
		d += fmt.Sprintf(" minted=%d", minted)
	}
	switch {
	case err != nil:
		d += " -> " + err.Error()
	case res.Duplicate:
		d += fmt.Sprintf(" -> duplicate pos=%d pending=%d", res.Pos, res.Pending)
	default:
		d += fmt.Sprintf(" -> pos=%d pending=%d", res.Pos, res.Pending)
	}
	w.s.record(string(world.AppendOp(ev.Kind)), run, d)
}

func (w *World) commit(run string, ev world.Event, pre world.Precondition, minted int64) (world.AppendResult, error) {
	rs, ok := w.runs[run]
	if !ok {
		return world.AppendResult{}, fmt.Errorf("sim: append %s to run %s: %w", ev.Kind, run, world.ErrNotFound)
	}
	if ev.ID != "" {
		if pos, dup := rs.ids[ev.ID]; dup {
			return world.AppendResult{Pos: pos, Duplicate: true, Pending: rs.pendingAt(rs.lastPos)}, nil
		}
	}
	if rs.run.Status.Terminal() {
		return world.AppendResult{}, fmt.Errorf("sim: append %s to run %s: run is %s: %w", ev.Kind, run, rs.run.Status, world.ErrGone)
	}
	if w.opts.Guard && pre.Guarded && rs.lastPos != pre.LastPos {
		return world.AppendResult{}, fmt.Errorf("sim: append %s to run %s: last position %d, writer saw %d: %w",
			ev.Kind, run, rs.lastPos, pre.LastPos, world.ErrPrecondition)
	}
	var st *stepState
	switch ev.Kind {
	case world.StepCreated:
		if _, ok := rs.steps[ev.Entity]; ok {
			return world.AppendResult{}, fmt.Errorf("sim: step %s of run %s already created: %w", ev.Entity, run, world.ErrConflict)
		}
	case world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying:
		st = rs.steps[ev.Entity]
		if st == nil {
			return world.AppendResult{}, fmt.Errorf("sim: %s for step %s of run %s: %w", ev.Kind, ev.Entity, run, world.ErrNotFound)
		}
		if st.terminal != 0 {
			return world.AppendResult{}, fmt.Errorf("sim: %s for step %s of run %s: step is terminal: %w", ev.Kind, ev.Entity, run, world.ErrConflict)
		}
	case world.HookCreated:
		if _, ok := w.hooks[ev.Entity]; ok {
			return world.AppendResult{}, fmt.Errorf("sim: hook %s: %w", ev.Entity, world.ErrConflict)
		}
	case world.HookReceived:
		if !rs.hooks[ev.Entity] {
			return world.AppendResult{}, fmt.Errorf("sim: hook_received for hook %s of run %s: %w", ev.Entity, run, world.ErrNotFound)
		}
	}

	pos := rs.lastPos + 1
	if w.cfg.Log == MintOrdered {
		if minted == 0 { // issued before the run existed
			rs.minted++
			minted = rs.minted
		}
		pos = minted
	}
	ev.Pos = pos
	if ev.Data != nil {
		ev.Data = append([]byte(nil), ev.Data...)
	}
	switch ev.Kind {
	case world.StepCreated:
		rs.steps[ev.Entity] = &stepState{created: pos}
		rs.pending++
	case world.StepCompleted, world.StepFailed:
		st.terminal = pos
		rs.pending--
	case world.HookCreated:
		w.hooks[ev.Entity] = run
		rs.hooks[ev.Entity] = true
	case world.RunStarted:
		if rs.run.Status == world.StatusPending {
			rs.run.Status = world.StatusRunning
		}
	case world.RunCompleted:
		rs.run.Status = world.StatusCompleted
	case world.RunFailed:
		rs.run.Status = world.StatusFailed
	}
	if ev.ID != "" {
		rs.ids[ev.ID] = pos
	}
	if pos > rs.lastPos {
		rs.events = append(rs.events, ev)
		rs.lastPos = pos
	} else {
		// A mint-ordered write landing behind later positions.
		i := sort.Search(len(rs.events), func(i int) bool { return rs.events[i].Pos > pos })
		rs.events = slices.Insert(slices.Clip(rs.events), i, ev) // copy: snapshots share the old array
	}
	pending := rs.pending
	if !w.cfg.PendingAtCommit {
		pending = rs.pendingAt(pos)
	}
	return world.AppendResult{Pos: pos, Pending: pending}, nil
}

// pendingAt counts the steps created and not terminal among the committed
// events at positions <= pos.
func (rs *runState) pendingAt(pos int64) int {
	if pos >= rs.lastPos {
		return rs.pending
	}
	n := 0
	for _, st := range rs.steps {
		if st.created <= pos && (st.terminal == 0 || st.terminal > pos) {
			n++
		}
	}
	return n
}

// Load returns the run's committed events in position order.
func (w *World) Load(ctx context.Context, run string) ([]world.Event, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) ([]world.Event, error) { return w.Load(ctx, run) })
	}
	if err := w.enter(ctx); err != nil {
		return nil, err
	}
	if err := w.await(world.OpLoad); err != nil {
		return nil, err
	}
	rs, ok := w.runs[run]
	if !ok {
		w.s.record(string(world.OpLoad), run, "not found")
		return nil, fmt.Errorf("sim: load run %s: %w", run, world.ErrNotFound)
	}
	// A shared, capacity-capped snapshot (Load's result is read-only): an
	// append at the end writes past its length, and an insert behind it
	// (mint-ordered) copies first, so the snapshot never changes. The cost
	// of a long log is virtual (the profile's per-event latency), so the
	// simulation need not pay for copying it.
	evs := slices.Clip(rs.events)
	if w.s.trace != nil {
		w.s.record(string(world.OpLoad), run, fmt.Sprintf("n=%d last=%d", len(evs), rs.lastPos))
	}
	return evs, nil
}

// HookRun returns the run that created token.
func (w *World) HookRun(ctx context.Context, token string) (string, error) {
	if !w.s.inTask() {
		return outside(w, ctx, func(ctx context.Context) (string, error) { return w.HookRun(ctx, token) })
	}
	if err := w.enter(ctx); err != nil {
		return "", err
	}
	if err := w.await(world.OpHookRun); err != nil {
		return "", err
	}
	run, ok := w.hooks[token]
	if !ok {
		w.s.record(string(world.OpHookRun), "", token+" -> not found")
		return "", fmt.Errorf("sim: hook %s: %w", token, world.ErrNotFound)
	}
	w.s.record(string(world.OpHookRun), run, token)
	return run, nil
}
