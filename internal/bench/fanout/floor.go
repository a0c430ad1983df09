package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// CountingWorld wraps a real world and counts its calls by world.Op, plus
// the events every Load returned. It is how the benchmarks show the floor
// issues the same operations as the engine.
type CountingWorld struct {
	world.World
	ops    map[world.Op]*atomic.Int64 // built once, read-only afterwards
	loaded atomic.Int64               // events returned by Load
}

// NewCountingWorld wraps w.
func NewCountingWorld(w world.World) *CountingWorld {
	c := &CountingWorld{World: w, ops: make(map[world.Op]*atomic.Int64)}
	for _, op := range world.Ops() {
		c.ops[op] = new(atomic.Int64)
	}
	return c
}

func (c *CountingWorld) count(op world.Op) { c.ops[op].Add(1) }

func (c *CountingWorld) CreateRun(ctx context.Context, r world.Run) error {
	c.count(world.OpCreateRun)
	return c.World.CreateRun(ctx, r)
}

func (c *CountingWorld) GetRun(ctx context.Context, id string) (world.Run, error) {
	c.count(world.OpGetRun)
	return c.World.GetRun(ctx, id)
}

func (c *CountingWorld) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	c.count(world.AppendOp(ev.Kind))
	return c.World.Append(ctx, run, ev, pre)
}

func (c *CountingWorld) Load(ctx context.Context, run string) ([]world.Event, error) {
	c.count(world.OpLoad)
	evs, err := c.World.Load(ctx, run)
	c.loaded.Add(int64(len(evs)))
	return evs, err
}

func (c *CountingWorld) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	c.count(world.OpPublish)
	return c.World.Publish(ctx, m, opt)
}

func (c *CountingWorld) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	return c.World.Consume(ctx, opt, func(ctx context.Context, d world.Delivery) error {
		c.count(world.OpDeliver)
		return h(ctx, d)
	})
}

// Counts is a snapshot of a CountingWorld: calls by world.Op, and the
// events all Loads returned.
type Counts struct {
	Ops    map[world.Op]int64
	Loaded int64
}

// Snapshot returns the counts so far.
func (c *CountingWorld) Snapshot() Counts {
	s := Counts{Ops: make(map[world.Op]int64, len(c.ops)), Loaded: c.loaded.Load()}
	for op, n := range c.ops {
		if v := n.Load(); v != 0 {
			s.Ops[op] = v
		}
	}
	return s
}

// Sub returns s - o.
func (s Counts) Sub(o Counts) Counts {
	d := Counts{Ops: make(map[world.Op]int64), Loaded: s.Loaded - o.Loaded}
	for op, n := range s.Ops {
		if v := n - o.Ops[op]; v != 0 {
			d.Ops[op] = v
		}
	}
	return d
}

// Total is the number of calls of every Op.
func (s Counts) Total() int64 {
	var t int64
	for _, n := range s.Ops {
		t += n
	}
	return t
}

// String lists the counts in world.Ops order, e.g. "[step_created=256 publish=256 ...] loaded_events=...".
func (s Counts) String() string {
	var parts []string
	for _, op := range world.Ops() {
		if n := s.Ops[op]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", op, n))
		}
	}
	return fmt.Sprintf("%v loaded_events=%d", parts, s.Loaded)
}

// Floor issues, for one fan-out run, the world operations a version of the
// engine issues — the same calls with the same event kinds, IDs, entities
// and message IDs, in the same order and at the same concurrency — with
// nothing else: no program decoding, no message encoding, no replay of the
// log (a Load is issued and its result dropped), no observer. Whatever time
// the engine spends above this floor is the engine's own overhead.
//
// It covers what a fan-out on an unguarded world needs: one orchestrator
// invocation (runs.get, load, run_started, dispatch), the inline steps,
// one delivery per queued step (runs.get unless run context, claim,
// completion, a load unless pending count), recovery of a claim that beat
// its step_created (in band or by redelivery, as the version says), and the
// last completer's continuation (load, run_completed).
type Floor struct {
	w        world.World
	rt       world.Runtime
	f        engine.Features
	n        int
	input    []byte   // run input of the engine's size
	entities []string // "0.<i>"
	creates  []string // "c/0.<i>"
	dones    []string // "d/0.<i>"
	bodies   [][]byte // step message bodies: the step index
	sub      world.Subscription
	runs     sync.Map     // run id -> *floorRun
	lastErr  atomic.Value // error: the last failed delivery, for a stuck run's report
}

// floorRun is one run of the floor.
type floorRun struct {
	id        string
	stepMsgID []string
	t0        time.Duration
	lastBody  atomic.Int64 // latest "body" instant (after the claim)
	completed atomic.Int32
	counted   []atomic.Bool // step i's completion was counted
	noPending atomic.Bool   // a completion reported no pending step (pending counts)
	finishing atomic.Bool   // the finisher is chosen (pending counts)
	done      chan struct{}
	end       time.Duration
}

var wfBody = []byte{'w'}

// NewFloor returns the floor of version f's n-branch fan-out on w. inputSize
// is the size of the run input the engine stores (the encoded program).
func NewFloor(w world.World, f engine.Features, n int, inputSize int) *Floor {
	fl := &Floor{w: w, rt: w.Runtime(), f: engine.Effective(f, w.Capabilities()), n: n, input: make([]byte, inputSize)}
	for i := range n {
		id := "0." + strconv.Itoa(i)
		fl.entities = append(fl.entities, id)
		fl.creates = append(fl.creates, "c/"+id)
		fl.dones = append(fl.dones, "d/"+id)
		fl.bodies = append(fl.bodies, []byte(strconv.Itoa(i)))
	}
	return fl
}

// Start subscribes the floor's consumer with the engine's concurrency.
func (fl *Floor) Start(ctx context.Context, concurrency int) error {
	if fl.w.Capabilities().Guard {
		return errors.New("floor: guarded worlds are not modelled")
	}
	sub, err := fl.w.Consume(ctx, world.ConsumeOptions{Concurrency: concurrency}, fl.handle)
	fl.sub = sub
	return err
}

// Stop stops the floor's consumer.
func (fl *Floor) Stop(ctx context.Context) error { return fl.sub.Stop(ctx) }

// Run performs one run and returns its TTLS (latest body instant - t0).
func (fl *Floor) Run(ctx context.Context, id string, timeout time.Duration) (ttls time.Duration, err error) {
	r := &floorRun{id: id, done: make(chan struct{}), stepMsgID: make([]string, fl.n), counted: make([]atomic.Bool, fl.n)}
	for i := range fl.n {
		r.stepMsgID[i] = "step/" + id + "/" + fl.entities[i]
	}
	fl.runs.Store(id, r)
	r.t0 = fl.rt.Now()
	if err := fl.w.CreateRun(ctx, world.Run{ID: id, Deployment: "durabench", SpecVersion: 1, Input: fl.input}); err != nil {
		return 0, err
	}
	if _, err := fl.w.Publish(ctx, world.Message{ID: "wf/" + id + "/start", Run: id, Body: wfBody}, world.PublishOptions{}); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
	case <-time.After(timeout):
		err, _ := fl.lastErr.Load().(error)
		return 0, fmt.Errorf("floor run %s did not finish in %v (%d of %d steps completed; last delivery error: %v)",
			id, timeout, r.completed.Load(), fl.n, err)
	}
	return time.Duration(r.lastBody.Load()) - r.t0, nil
}

func (fl *Floor) handle(ctx context.Context, d world.Delivery) error {
	v, ok := fl.runs.Load(d.Run)
	if !ok {
		return nil
	}
	r := v.(*floorRun)
	var err error
	if d.Body[0] == 'w' {
		err = fl.orchestrate(ctx, r)
	} else {
		i, _ := strconv.Atoi(string(d.Body))
		err = fl.step(ctx, r, i, d.Attempt)
	}
	if err != nil {
		fl.lastErr.Store(fmt.Errorf("%s attempt %d: %w", d.Body, d.Attempt, err))
	}
	return err
}

func (fl *Floor) orchestrate(ctx context.Context, r *floorRun) error {
	if _, err := fl.w.GetRun(ctx, r.id); err != nil {
		return err
	}
	evs, err := fl.w.Load(ctx, r.id)
	if err != nil {
		return err
	}
	if _, err := fl.w.Append(ctx, r.id, world.Event{Kind: world.RunStarted, ID: "run_started"},
		world.Precondition{Guarded: true, LastPos: int64(len(evs))}); err != nil {
		return err
	}
	nInline := min(fl.f.InlineSteps, fl.n)
	if fl.f.InlineBudget > 0 {
		nInline = min(nInline, fl.f.InlineBudget)
	}
	// owned[i]: this invocation's create of inline step i was not a
	// duplicate, so it runs the step.
	owned := make([]bool, nInline)
	create := func(i int) {
		res, err := fl.create(ctx, r, i)
		if i < nInline {
			owned[i] = err == nil && !res.Duplicate
		}
	}
	// publishQueued publishes the queued steps' messages in the version's
	// loop, as the engine's publishAll does.
	publishQueued := func() error {
		if fl.f.PublishLoop == engine.Serial {
			for i := nInline; i < fl.n; i++ {
				if err := fl.publish(ctx, r, i); err != nil {
					return err
				}
			}
			return nil
		}
		var pub sync.WaitGroup
		for i := nInline; i < fl.n; i++ {
			pub.Go(func() { _ = fl.publish(ctx, r, i) })
		}
		pub.Wait()
		return nil
	}
	parallel := fl.f.Dispatch == engine.Parallel
	var wg sync.WaitGroup
	for i := range fl.n {
		wg.Go(func() { create(i) })
		if parallel && i >= nInline && fl.f.PublishLoop != engine.Serial {
			wg.Go(func() { _ = fl.publish(ctx, r, i) })
		}
	}
	if parallel {
		if fl.f.PublishLoop == engine.Serial {
			wg.Go(func() { _ = publishQueued() })
		}
		wg.Wait()
	} else {
		wg.Wait()
		if err := publishQueued(); err != nil {
			return err
		}
	}
	for i := range nInline {
		if !owned[i] {
			continue
		}
		if _, err := fl.w.Append(ctx, r.id, world.Event{Kind: world.StepStarted, Entity: fl.entities[i]}, world.Precondition{}); err != nil {
			if errors.Is(err, world.ErrConflict) || errors.Is(err, world.ErrGone) {
				return nil // another task ran it, or the run ended
			}
			return err
		}
		fl.body(r)
		if err := fl.complete(ctx, r, i); err != nil {
			return err
		}
	}
	return nil
}

func (fl *Floor) create(ctx context.Context, r *floorRun, i int) (world.AppendResult, error) {
	return fl.w.Append(ctx, r.id, world.Event{Kind: world.StepCreated, ID: fl.creates[i], Entity: fl.entities[i]}, world.Precondition{})
}

func (fl *Floor) publish(ctx context.Context, r *floorRun, i int) error {
	_, err := fl.w.Publish(ctx, world.Message{ID: r.stepMsgID[i], Run: r.id, Body: fl.bodies[i]}, world.PublishOptions{})
	return err
}

// body marks the instant a step body would end (bodies are no-ops).
func (fl *Floor) body(r *floorRun) {
	now := int64(fl.rt.Now())
	for {
		old := r.lastBody.Load()
		if now <= old || r.lastBody.CompareAndSwap(old, now) {
			return
		}
	}
}

func (fl *Floor) step(ctx context.Context, r *floorRun, i, attempt int) error {
	if !fl.f.RunContext {
		if _, err := fl.w.GetRun(ctx, r.id); err != nil {
			return err
		}
	}
	withInput := fl.f.Dispatch == engine.Parallel
	if withInput && attempt > 1 && fl.f.Recovery != engine.RecoveryNone {
		_, _ = fl.create(ctx, r, i)
	}
	claim := world.Event{Kind: world.StepStarted, Entity: fl.entities[i]}
	_, err := fl.w.Append(ctx, r.id, claim, world.Precondition{})
	if errors.Is(err, world.ErrNotFound) && withInput && fl.f.Recovery == engine.RecoveryInband {
		if _, err = fl.create(ctx, r, i); err == nil || errors.Is(err, world.ErrConflict) {
			_, err = fl.w.Append(ctx, r.id, claim, world.Precondition{})
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, world.ErrConflict):
		// Already completed: a redelivery after a completion whose
		// delivery failed. The engine rechecks the run; the floor makes
		// sure the completion was counted.
		return fl.complete(ctx, r, i)
	case errors.Is(err, world.ErrGone):
		return nil
	default:
		return err // redelivered, as the engine's claim failure is
	}
	fl.body(r)
	return fl.complete(ctx, r, i)
}

// complete writes step i's completion; the last completer loads the log and
// completes the run. As in the engine, a completer that is not known to be
// the last loads the log to find out — unless the stage has one step, or
// the version has pending counts and the completion reports steps still
// pending. The floor counts completions instead of replaying the log, so it
// knows which completer is the last.
func (fl *Floor) complete(ctx context.Context, r *floorRun, i int) error {
	res, err := fl.w.Append(ctx, r.id, world.Event{Kind: world.StepCompleted, ID: fl.dones[i], Entity: fl.entities[i]}, world.Precondition{})
	switch {
	case err == nil:
	case errors.Is(err, world.ErrConflict), errors.Is(err, world.ErrGone):
		return nil
	default:
		return err
	}
	if !r.counted[i].CompareAndSwap(false, true) {
		return nil // counted by an earlier delivery
	}
	if fl.f.PendingCount {
		// Commit order and the order in which completers count differ, so
		// the finisher is whoever sees both "every completion counted" and
		// "a completion reported no step pending" (each side sets its
		// flag before it looks at the other's, so one of them sees both).
		counted := int(r.completed.Add(1)) == fl.n
		if res.Pending == 0 {
			if fl.n > 1 {
				if _, err := fl.w.Load(ctx, r.id); err != nil {
					return err
				}
			}
			r.noPending.Store(true)
			counted = int(r.completed.Load()) == fl.n
		}
		if !counted || !r.noPending.Load() || !r.finishing.CompareAndSwap(false, true) {
			return nil
		}
	} else {
		last := int(r.completed.Add(1)) == fl.n
		if fl.n > 1 {
			if _, err := fl.w.Load(ctx, r.id); err != nil {
				return err
			}
		}
		if !last {
			return nil
		}
	}
	evs, err := fl.w.Load(ctx, r.id)
	if err != nil {
		return err
	}
	if _, err := fl.w.Append(ctx, r.id, world.Event{Kind: world.RunCompleted, ID: "run_completed"},
		world.Precondition{Guarded: true, LastPos: int64(len(evs))}); err != nil {
		return err
	}
	r.end = fl.rt.Now()
	close(r.done)
	return nil
}
