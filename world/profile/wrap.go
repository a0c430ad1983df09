package profile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/durabench/durabench/world"
)

// World is a world with a profile applied. Wrap returns one.
type World struct {
	inner world.World
	rt    world.Runtime
	prof  *Profile

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	// Rules per op; nil where the profile changes nothing, so those calls
	// go straight to the inner world.
	appends                             [world.StreamClosed + 1]*rule
	createRun, getRun, listRuns, load   *rule
	publish, deliver, hookRun           *rule
	writeChunk, readChunks, closeStream *rule
	// waits is set when some rule has a capacity: calls then report their
	// wait for it (world.CallWait).
	waits bool
}

// rule is a Rule ready to apply: capacity as a semaphore, a fixed latency
// unpacked so it needs no random draw.
type rule struct {
	op        world.Op
	lat       Dist          // nil: the latency is fixed
	fixed     time.Duration // the latency when lat is nil
	transient float64
	sem       world.Semaphore // nil: no capacity limit
	perEvent  time.Duration
}

var _ world.World = (*World)(nil)

// Wrap returns w with profile p applied, drawing latencies and faults from a
// generator seeded with seed. The result has w's name, capabilities and
// runtime. When p changes nothing (the none profile), Wrap returns w itself.
//
// Every call of an op the profile covers:
//
//  1. waits for a permit when the op has a capacity (a semaphore from
//     w.Runtime(), shared by the ops of a group), and holds it until the
//     call returns;
//  2. draws its latency and whether it fails, in that order, from the one
//     seeded generator (under a mutex; on the sim world calls run one at a
//     time in a deterministic order, so a seed replays the same draws);
//  3. sleeps the latency through w.Runtime() — real time on mem and nats,
//     virtual time on sim;
//  4. on a transient failure returns a *FaultError (wrapping
//     world.ErrTransient) WITHOUT calling w: the request failed before it
//     reached the backend, so a failed write did not happen and a retry is
//     safe — the 429 / 503 case. (A write that commits and then times out is
//     not modelled.) A failure still costs its latency;
//  5. calls w; for log_load, then sleeps PerEvent per returned event.
//
// Deliveries (op deliver) pay their latency, capacity and faults before the
// handler runs; the permit is released before the handler starts, since the
// handler's time is the engine's. A failed delivery does not run the handler
// and returns the *FaultError to w, which retries the message according to
// its retry style. stream_read holds its permit only for the injected
// latency, because the inner read may long-poll.
func Wrap(w world.World, p *Profile, seed int64) world.World {
	if p == nil || p.inert() {
		return w
	}
	pw := &World{
		inner: w,
		rt:    w.Runtime(),
		prof:  p,
		// The second PCG word separates this stream from other users of
		// the same seed.
		rng: rand.New(rand.NewPCG(uint64(seed), 0x70726f66696c65)), // "profile"
	}
	groupSems := map[string]world.Semaphore{}
	build := func(op world.Op) *rule {
		r := p.For(op)
		var sem world.Semaphore
		if g := p.groupOf(op); g != nil && g.Capacity > 0 {
			if groupSems[g.Name] == nil {
				groupSems[g.Name] = pw.rt.NewSemaphore(g.Capacity)
			}
			sem = groupSems[g.Name]
		} else if r.Capacity > 0 {
			sem = pw.rt.NewSemaphore(r.Capacity)
		}
		if r.Latency == nil && r.Transient <= 0 && sem == nil && r.PerEvent <= 0 {
			return nil
		}
		if sem != nil {
			pw.waits = true
		}
		ru := &rule{op: op, lat: r.Latency, transient: r.Transient, sem: sem, perEvent: r.PerEvent}
		if f, ok := r.Latency.(Fixed); ok {
			ru.lat, ru.fixed = nil, time.Duration(f)
		}
		return ru
	}
	for k := world.RunCreated; k <= world.StreamClosed; k++ {
		pw.appends[k] = build(world.AppendOp(k))
	}
	pw.createRun = build(world.OpCreateRun)
	pw.getRun = build(world.OpGetRun)
	pw.listRuns = build(world.OpListRuns)
	pw.load = build(world.OpLoad)
	pw.publish = build(world.OpPublish)
	pw.deliver = build(world.OpDeliver)
	pw.hookRun = build(world.OpHookRun)
	pw.writeChunk = build(world.OpWriteChunk)
	pw.readChunks = build(world.OpReadChunks)
	pw.closeStream = build(world.OpCloseStream)
	return pw
}

// Unwrap returns the world the profile is applied to.
func (w *World) Unwrap() world.World { return w.inner }

// Profile returns the applied profile.
func (w *World) Profile() *Profile { return w.prof }

// draw returns the call's latency and whether it fails.
func (w *World) draw(r *rule) (time.Duration, bool) {
	if r.lat == nil && r.transient <= 0 {
		return r.fixed, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	d := r.fixed
	if r.lat != nil {
		d = r.lat.Sample(w.rng)
	}
	return d, r.transient > 0 && w.rng.Float64() < r.transient
}

// begin takes a permit, sleeps the latency and rolls the fault. On success
// the caller holds the permit and must call end. The wait for the permit
// is added to the call's world.CallWait, if its ctx carries one.
func (w *World) begin(ctx context.Context, r *rule) error {
	_, err := w.beginWait(ctx, r)
	return err
}

// beginWait is begin, returning the wait for the permit as well.
func (w *World) beginWait(ctx context.Context, r *rule) (wait time.Duration, err error) {
	if r.sem != nil {
		asked := w.rt.Now()
		if err := r.sem.Acquire(ctx); err != nil {
			return 0, fmt.Errorf("%s: waiting for capacity: %w", r.op, err)
		}
		wait = w.rt.Now() - asked
		world.AddCallWait(ctx, wait)
	}
	return wait, w.serve(ctx, r)
}

// serve sleeps the call's latency and rolls its fault, holding the permit.
func (w *World) serve(ctx context.Context, r *rule) error {
	d, fail := w.draw(r)
	if d > 0 {
		if err := w.rt.Sleep(ctx, d); err != nil {
			w.end(r)
			return fmt.Errorf("%s: %w", r.op, err)
		}
	}
	if fail {
		w.end(r)
		return &FaultError{Profile: w.prof.Name, Op: r.op}
	}
	return nil
}

func (w *World) end(r *rule) {
	if r.sem != nil {
		r.sem.Release()
	}
}

// Name returns the inner world's name.
func (w *World) Name() string { return w.inner.Name() }

// Capabilities returns the inner world's capabilities.
func (w *World) Capabilities() world.Capabilities {
	c := w.inner.Capabilities()
	if n := w.prof.For(world.OpDeliver).Concurrency; n > 0 {
		c.Concurrency = n
	}
	c.CapacityWaits = c.CapacityWaits || w.waits
	return c
}

// Runtime returns the inner world's runtime.
func (w *World) Runtime() world.Runtime { return w.rt }

// Close closes the inner world.
func (w *World) Close() error { return w.inner.Close() }

// CreateRun applies run_create's rule, then creates the run.
func (w *World) CreateRun(ctx context.Context, run world.Run) error {
	r := w.createRun
	if r == nil {
		return w.inner.CreateRun(ctx, run)
	}
	if err := w.begin(ctx, r); err != nil {
		return err
	}
	defer w.end(r)
	return w.inner.CreateRun(ctx, run)
}

// GetRun applies run_get's rule, then reads the run.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	r := w.getRun
	if r == nil {
		return w.inner.GetRun(ctx, id)
	}
	if err := w.begin(ctx, r); err != nil {
		return world.Run{}, err
	}
	defer w.end(r)
	return w.inner.GetRun(ctx, id)
}

// ListRuns applies run_list's rule, then lists the runs.
func (w *World) ListRuns(ctx context.Context) ([]string, error) {
	r := w.listRuns
	if r == nil {
		return w.inner.ListRuns(ctx)
	}
	if err := w.begin(ctx, r); err != nil {
		return nil, err
	}
	defer w.end(r)
	return w.inner.ListRuns(ctx)
}

// Append applies the rule of ev's kind, then appends.
func (w *World) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	var r *rule
	if int(ev.Kind) < len(w.appends) {
		r = w.appends[ev.Kind]
	}
	if r == nil {
		return w.inner.Append(ctx, run, ev, pre)
	}
	if err := w.begin(ctx, r); err != nil {
		return world.AppendResult{}, err
	}
	defer w.end(r)
	return w.inner.Append(ctx, run, ev, pre)
}

// Load applies log_load's rule, loads the log, then sleeps the per-event
// cost of the log's length while still holding the permit.
func (w *World) Load(ctx context.Context, run string) ([]world.Event, error) {
	r := w.load
	if r == nil {
		return w.inner.Load(ctx, run)
	}
	if err := w.begin(ctx, r); err != nil {
		return nil, err
	}
	defer w.end(r)
	events, err := w.inner.Load(ctx, run)
	if err == nil && r.perEvent > 0 && len(events) > 0 {
		if err := w.rt.Sleep(ctx, r.perEvent*time.Duration(len(events))); err != nil {
			return nil, fmt.Errorf("%s: %w", r.op, err)
		}
	}
	return events, err
}

// Publish applies publish's rule, then publishes.
func (w *World) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	r := w.publish
	if r == nil {
		return w.inner.Publish(ctx, m, opt)
	}
	if err := w.begin(ctx, r); err != nil {
		return false, err
	}
	defer w.end(r)
	return w.inner.Publish(ctx, m, opt)
}

// Consume consumes from the inner world with a handler that applies
// deliver's rule before h runs. (deliver's concurrency is not imposed
// here: Capabilities offers it, and a consumer asks for what it wants.)
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	r := w.deliver
	if r == nil {
		return w.inner.Consume(ctx, opt, h)
	}
	return w.inner.Consume(ctx, opt, func(ctx context.Context, d world.Delivery) error {
		wait, err := w.beginWait(ctx, r)
		if err != nil {
			return err
		}
		w.end(r)
		if wait > 0 {
			ctx = world.WithDeliveryWait(ctx, wait)
		}
		return h(ctx, d)
	})
}

// HookRun applies hook_lookup's rule, then looks the token up.
func (w *World) HookRun(ctx context.Context, token string) (string, error) {
	r := w.hookRun
	if r == nil {
		return w.inner.HookRun(ctx, token)
	}
	if err := w.begin(ctx, r); err != nil {
		return "", err
	}
	defer w.end(r)
	return w.inner.HookRun(ctx, token)
}

// WriteChunk applies stream_write's rule, then writes.
func (w *World) WriteChunk(ctx context.Context, stream string, c world.Chunk) error {
	r := w.writeChunk
	if r == nil {
		return w.inner.WriteChunk(ctx, stream, c)
	}
	if err := w.begin(ctx, r); err != nil {
		return err
	}
	defer w.end(r)
	return w.inner.WriteChunk(ctx, stream, c)
}

// ReadChunks applies stream_read's rule, releases the permit, then reads
// (the read may wait up to wait for a chunk).
func (w *World) ReadChunks(ctx context.Context, stream string, from int, wait time.Duration) ([]world.Chunk, bool, error) {
	r := w.readChunks
	if r == nil {
		return w.inner.ReadChunks(ctx, stream, from, wait)
	}
	if err := w.begin(ctx, r); err != nil {
		return nil, false, err
	}
	w.end(r)
	return w.inner.ReadChunks(ctx, stream, from, wait)
}

// CloseStream applies stream_close's rule, then closes the stream.
func (w *World) CloseStream(ctx context.Context, stream string) error {
	r := w.closeStream
	if r == nil {
		return w.inner.CloseStream(ctx, stream)
	}
	if err := w.begin(ctx, r); err != nil {
		return err
	}
	defer w.end(r)
	return w.inner.CloseStream(ctx, stream)
}
