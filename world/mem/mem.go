// Package mem is the in-process world: runs, logs, hooks, streams and the
// queue live in maps behind mutexes, and deliveries run on goroutines. It has
// no dependencies and no I/O, so it is the floor for engine overhead: any
// time a benchmark spends on mem is the engine's own.
package mem

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/durabench/durabench/world"
)

// Name is the world's registry name.
const Name = "mem"

// World is the in-process world. Its zero value is not usable; call New.
type World struct {
	opts world.Options
	rt   *world.Real

	closed atomic.Bool
	done   chan struct{} // closed by Close; wakes long-polls

	runsMu sync.RWMutex
	runs   map[string]*run
	order  []string

	hooksMu sync.Mutex
	hooks   map[string]string // hook token -> run id

	streamsMu sync.Mutex
	streams   map[string]*stream

	q queue
}

var _ world.World = (*World)(nil)

// New returns an empty world configured by opts (zero fields take the
// defaults of world.Options.WithDefaults). Its Runtime is real time.
func New(opts world.Options) *World {
	w := &World{
		opts:    opts.WithDefaults(),
		rt:      world.NewReal(),
		done:    make(chan struct{}),
		runs:    make(map[string]*run),
		hooks:   make(map[string]string),
		streams: make(map[string]*stream),
	}
	w.q.init()
	return w
}

// Name returns "mem".
func (w *World) Name() string { return Name }

// Capabilities reports the options the world was created with.
func (w *World) Capabilities() world.Capabilities {
	return world.Capabilities{
		Guard:             w.opts.Guard,
		RetryStyle:        w.opts.RetryStyle,
		VisibilityTimeout: w.opts.VisibilityTimeout,
	}
}

// Runtime returns the world's real-time runtime.
func (w *World) Runtime() world.Runtime { return w.rt }

// Close stops every consumer (cancelling their handlers' context and waiting
// for them to return) and makes every later call fail with world.ErrClosed.
// Closing twice is not an error.
func (w *World) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(w.done)
	w.q.mu.Lock()
	subs := make([]*subscription, 0, len(w.q.subs))
	for s := range w.q.subs {
		subs = append(subs, s)
	}
	w.q.mu.Unlock()
	for _, s := range subs {
		s.cancel()
		s.halt()
		s.wait()
	}
	return nil
}

func (w *World) checkOpen(ctx context.Context) error {
	if w.closed.Load() {
		return fmt.Errorf("mem: %w", world.ErrClosed)
	}
	return ctx.Err()
}

// run is one run: its metadata, its log and the entity views the Append rules
// need, all guarded by mu.
type run struct {
	mu      sync.Mutex
	meta    world.Run
	events  []world.Event
	ids     map[string]int64 // event ID -> position
	steps   map[string]bool  // step id -> has a terminal event
	pending int              // steps created and not terminal
}

// CreateRun stores r and appends its run_created event at position 1.
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	if err := w.checkOpen(ctx); err != nil {
		return err
	}
	nr := &run{meta: r, events: make([]world.Event, 1, 16)}
	nr.meta.Status = world.StatusPending
	nr.meta.Input = clone(r.Input)
	nr.events[0] = world.Event{Pos: 1, Kind: world.RunCreated}
	w.runsMu.Lock()
	defer w.runsMu.Unlock()
	if _, ok := w.runs[r.ID]; ok {
		return fmt.Errorf("mem: create run %q: %w", r.ID, world.ErrConflict)
	}
	w.runs[r.ID] = nr
	w.order = append(w.order, r.ID)
	return nil
}

func (w *World) run(id string) (*run, error) {
	w.runsMu.RLock()
	r := w.runs[id]
	w.runsMu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("mem: run %q: %w", id, world.ErrNotFound)
	}
	return r, nil
}

// GetRun returns the run with its status derived from its log.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	if err := w.checkOpen(ctx); err != nil {
		return world.Run{}, err
	}
	r, err := w.run(id)
	if err != nil {
		return world.Run{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta, nil
}

// ListRuns returns every run id in creation order.
func (w *World) ListRuns(ctx context.Context) ([]string, error) {
	if err := w.checkOpen(ctx); err != nil {
		return nil, err
	}
	w.runsMu.RLock()
	defer w.runsMu.RUnlock()
	return append([]string(nil), w.order...), nil
}

// Append applies the rules documented on world.Log, in their order, and
// appends ev. The pending count is read under the same lock as the append.
//
// Its frame is kept small — a refusal's error is built out of line
// (appendRefused) — because a fan-out's dispatch calls it from a fresh
// goroutine per step, on a small stack: a large frame here made each of
// them copy its stack to grow it.
func (w *World) Append(ctx context.Context, runID string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	if err := w.checkOpen(ctx); err != nil {
		return world.AppendResult{}, err
	}
	r, err := w.run(runID)
	if err != nil {
		return world.AppendResult{}, err
	}
	data := clone(ev.Data) // the caller keeps its buffer; copied before the lock
	r.mu.Lock()
	res, why := r.admit(&ev, w.opts.Guard, pre)
	var hookErr error
	if !res.Duplicate && why == refusedNone {
		if ev.Kind == world.HookCreated || ev.Kind == world.HookReceived {
			hookErr = w.hookRule(ctx, runID, &ev)
		}
		if hookErr == nil {
			res = r.commit(&ev, data)
		}
	}
	r.mu.Unlock()
	if hookErr != nil {
		return world.AppendResult{}, hookErr
	}
	if why != refusedNone {
		return world.AppendResult{}, appendRefused(why, runID, &ev, res.Pos, pre)
	}
	return res, nil
}

// hookRule applies a hook event's rule (r.mu held, as for every rule): a
// created hook registers its token, a received one must name a hook of
// the run.
//
//go:noinline
func (w *World) hookRule(ctx context.Context, runID string, ev *world.Event) error {
	switch ev.Kind {
	case world.HookCreated:
		return w.registerHook(ev.Entity, runID)
	case world.HookReceived:
		if owner, err := w.HookRun(ctx, ev.Entity); err != nil || owner != runID {
			return fmt.Errorf("mem: hook_received: hook %q in run %q: %w", ev.Entity, runID, world.ErrNotFound)
		}
	}
	return nil
}

// refusal is why an append was refused (refusedNone: it was not).
type refusal uint8

const (
	refusedNone refusal = iota
	refusedGone
	refusedGuard
	refusedCreated
	refusedNoStep
	refusedStepDone
	refusedKind
)

// admit applies the rules to ev but its hook rule (hookRule), in their
// order: a duplicate is answered (res.Duplicate), else a refusal says why;
// r.mu is held. A refusal's error is built outside the lock
// (appendRefused; res.Pos then carries the log's length for a guard).
func (r *run) admit(ev *world.Event, guard bool, pre world.Precondition) (res world.AppendResult, why refusal) {
	if ev.ID != "" {
		if pos, ok := r.ids[ev.ID]; ok {
			return world.AppendResult{Pos: pos, Duplicate: true, Pending: r.pending}, refusedNone
		}
	}
	if r.meta.Status.Terminal() {
		return world.AppendResult{}, refusedGone
	}
	if guard && pre.Guarded && pre.LastPos != int64(len(r.events)) {
		return world.AppendResult{Pos: int64(len(r.events))}, refusedGuard
	}
	switch ev.Kind {
	case world.StepCreated:
		if _, ok := r.steps[ev.Entity]; ok {
			return world.AppendResult{}, refusedCreated
		}
	case world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying:
		terminal, ok := r.steps[ev.Entity]
		if !ok {
			return world.AppendResult{}, refusedNoStep
		}
		if terminal {
			return world.AppendResult{}, refusedStepDone
		}
	case world.HookCreated, world.HookReceived: // hookRule
	case world.RunCreated, world.RunStarted, world.RunCompleted, world.RunFailed, world.StreamClosed:
	default:
		return world.AppendResult{}, refusedKind
	}
	return world.AppendResult{}, refusedNone
}

// commit appends ev, which passed every rule, with its data; r.mu is
// held.
func (r *run) commit(ev *world.Event, data []byte) world.AppendResult {
	pos := int64(len(r.events)) + 1
	ev.Pos = pos
	ev.Data = data
	r.events = append(r.events, *ev)
	if ev.ID != "" {
		if r.ids == nil {
			r.ids = make(map[string]int64)
		}
		r.ids[ev.ID] = pos
	}
	switch ev.Kind {
	case world.StepCreated:
		if r.steps == nil {
			r.steps = make(map[string]bool)
		}
		r.steps[ev.Entity] = false
		r.pending++
	case world.StepCompleted, world.StepFailed:
		r.steps[ev.Entity] = true
		r.pending--
	case world.RunStarted:
		r.meta.Status = world.StatusRunning
	case world.RunCompleted:
		r.meta.Status = world.StatusCompleted
	case world.RunFailed:
		r.meta.Status = world.StatusFailed
	}
	return world.AppendResult{Pos: pos, Pending: r.pending}
}

// appendRefused is the error of an append refused for why; last is the
// log's length a guarded append was refused at.
//
//go:noinline
func appendRefused(why refusal, runID string, ev *world.Event, last int64, pre world.Precondition) error {
	switch why {
	case refusedGone:
		return fmt.Errorf("mem: append %s to run %q: %w", ev.Kind, runID, world.ErrGone)
	case refusedGuard:
		return fmt.Errorf("mem: append %s to run %q: last position %d, writer saw %d: %w",
			ev.Kind, runID, last, pre.LastPos, world.ErrPrecondition)
	case refusedCreated:
		return fmt.Errorf("mem: step %q of run %q already created: %w", ev.Entity, runID, world.ErrConflict)
	case refusedNoStep:
		return fmt.Errorf("mem: %s: step %q of run %q: %w", ev.Kind, ev.Entity, runID, world.ErrNotFound)
	case refusedStepDone:
		return fmt.Errorf("mem: %s: step %q of run %q is finished: %w", ev.Kind, ev.Entity, runID, world.ErrConflict)
	}
	return fmt.Errorf("mem: append to run %q: invalid event kind %d", runID, ev.Kind)
}

// Load returns a copy of the run's whole log: its cost grows with the log's
// length, as a real backend's read does. Event data is shared and must be
// treated as read-only.
func (w *World) Load(ctx context.Context, runID string) ([]world.Event, error) {
	if err := w.checkOpen(ctx); err != nil {
		return nil, err
	}
	r, err := w.run(runID)
	if err != nil {
		return nil, err
	}
	// The log only grows: an event once appended is never changed, and an
	// append that outgrows the array leaves the old one as it was. So the
	// events up to now are copied outside the lock, which appends and run
	// reads of a wide fan-out wait on (a 256-branch run's log loads copy
	// ~120,000 events).
	r.mu.Lock()
	evs := r.events
	r.mu.Unlock()
	out := make([]world.Event, len(evs))
	copy(out, evs)
	return out, nil
}

func (w *World) registerHook(token, runID string) error {
	w.hooksMu.Lock()
	defer w.hooksMu.Unlock()
	if owner, ok := w.hooks[token]; ok {
		return fmt.Errorf("mem: hook %q already created by run %q: %w", token, owner, world.ErrConflict)
	}
	w.hooks[token] = runID
	return nil
}

// HookRun returns the run whose log created the hook token.
func (w *World) HookRun(ctx context.Context, token string) (string, error) {
	if err := w.checkOpen(ctx); err != nil {
		return "", err
	}
	w.hooksMu.Lock()
	owner, ok := w.hooks[token]
	w.hooksMu.Unlock()
	if !ok {
		return "", fmt.Errorf("mem: hook %q: %w", token, world.ErrNotFound)
	}
	return owner, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
