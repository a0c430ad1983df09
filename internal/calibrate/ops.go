package calibrate

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// opTimer is a world decorator that times the calls the engine makes, as
// the engine sees them: a call's latency runs from the call to its return,
// so it includes the wait for the profile's capacity. It sits outside the
// profile and only reads the clock, so it changes nothing in the schedule:
// a cell measured with it gives the figures `durabench sweep` prints.
type opTimer struct {
	world.World
	rt world.Runtime
	// measured selects the runs whose calls count (the cell's measured
	// runs, not its warm-ups).
	measured func(run string) bool

	mu sync.Mutex
	// calls are the latencies of every call by op.
	calls map[world.Op][]time.Duration
	// spans are, per run, the first start and last end of the calls that
	// dispatch a stage's steps (dispatchCreate, dispatchPublish).
	spans map[spanKey]*span
	// published is when each message's first publish returned, until its
	// first delivery (op deliver: publish to handler).
	published map[string]time.Duration
}

type spanKey struct {
	run  string
	kind string
}

type span struct{ first, last time.Duration }

func newOpTimer(w world.World, measured func(run string) bool) *opTimer {
	return &opTimer{World: w, rt: w.Runtime(), measured: measured,
		calls: map[world.Op][]time.Duration{}, spans: map[spanKey]*span{}, published: map[string]time.Duration{}}
}

// Unwrap returns the timed world (world.IncidentsOf looks through it).
func (t *opTimer) Unwrap() world.World { return t.World }

func (t *opTimer) record(op world.Op, run, spanKind string, start time.Duration) {
	if !t.measured(run) {
		return
	}
	end := t.rt.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls[op] = append(t.calls[op], end-start)
	if spanKind == "" {
		return
	}
	k := spanKey{run, spanKind}
	if s := t.spans[k]; s != nil {
		s.first, s.last = min(s.first, start), max(s.last, end)
	} else {
		t.spans[k] = &span{start, end}
	}
}

// GetRun times run_get.
func (t *opTimer) GetRun(ctx context.Context, id string) (world.Run, error) {
	start := t.rt.Now()
	r, err := t.World.GetRun(ctx, id)
	t.record(world.OpGetRun, id, "", start)
	return r, err
}

// CreateRun times run_create.
func (t *opTimer) CreateRun(ctx context.Context, r world.Run) error {
	start := t.rt.Now()
	err := t.World.CreateRun(ctx, r)
	t.record(world.OpCreateRun, r.ID, "", start)
	return err
}

// Append times the append by its event kind; step_created writes also
// make up the run's dispatch.create span.
func (t *opTimer) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	start := t.rt.Now()
	res, err := t.World.Append(ctx, run, ev, pre)
	kind := ""
	if ev.Kind == world.StepCreated {
		kind = DispatchCreate
	}
	t.record(world.AppendOp(ev.Kind), run, kind, start)
	return res, err
}

// Load times log_load.
func (t *opTimer) Load(ctx context.Context, run string) ([]world.Event, error) {
	start := t.rt.Now()
	evs, err := t.World.Load(ctx, run)
	t.record(world.OpLoad, run, "", start)
	return evs, err
}

// Publish times publish; a step's execution message also makes up the
// run's dispatch.publish span.
func (t *opTimer) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	start := t.rt.Now()
	dup, err := t.World.Publish(ctx, m, opt)
	kind := ""
	if engine.IsStepMessage(m.ID) {
		kind = DispatchPublish
	}
	t.record(world.OpPublish, m.Run, kind, start)
	if err == nil && !dup && t.measured(m.Run) {
		t.mu.Lock()
		if _, seen := t.published[m.ID]; !seen {
			t.published[m.ID] = t.rt.Now()
		}
		t.mu.Unlock()
	}
	return dup, err
}

// Consume times op deliver: from a message's publish returning to its first
// delivery's handler starting — the queue's latency and the wait for a
// free handler, as the engine sees them.
func (t *opTimer) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	return t.World.Consume(ctx, opt, func(ctx context.Context, d world.Delivery) error {
		t.mu.Lock()
		at, ok := t.published[d.Message.ID]
		if ok && d.Attempt == 1 {
			delete(t.published, d.Message.ID)
			t.calls[world.OpDeliver] = append(t.calls[world.OpDeliver], t.rt.Now()-at)
		}
		t.mu.Unlock()
		return h(ctx, d)
	})
}

// opSamples returns the latencies of op's calls.
func (t *opTimer) opSamples(op world.Op) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.calls[op]...)
}

// spanSamples returns one span per measured run that made such calls.
func (t *opTimer) spanSamples(kind string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for k, s := range t.spans {
		if k.kind == kind {
			out = append(out, s.last-s.first)
		}
	}
	return out
}

// measuredRun reports whether run is one of a cell's measured runs: the
// driver names them "<prefix>-r0001", warm-ups "<prefix>-w0001".
func measuredRun(prefix string) func(run string) bool {
	p := prefix + "-r"
	return func(run string) bool { return strings.HasPrefix(run, p) }
}
