package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
)

// recorder is an engine.Observer that counts step bodies and signals run ends.
type recorder struct {
	rt     world.Runtime
	mu     sync.Mutex
	bodies map[string]map[string]int // run -> step "stage.index" -> body runs
	spans  map[string][]engine.StepSpan
	done   map[string]world.Future
	hooks  map[string]string // run -> token
	chunks map[string][]engine.ChunkSpan
	ends   map[string]time.Duration
}

func newRecorder(rt world.Runtime) *recorder {
	return &recorder{rt: rt, bodies: map[string]map[string]int{}, spans: map[string][]engine.StepSpan{},
		done: map[string]world.Future{}, hooks: map[string]string{}, chunks: map[string][]engine.ChunkSpan{},
		ends: map[string]time.Duration{}}
}

func (r *recorder) expect(run string) world.Future {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.rt.NewFuture()
	r.done[run] = f
	r.bodies[run] = map[string]int{}
	return f
}

func (r *recorder) StepBody(run string, s engine.StepSpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bodies[run] == nil {
		r.bodies[run] = map[string]int{}
	}
	r.bodies[run][fmt.Sprintf("%d.%d", s.Stage, s.Index)]++
	r.spans[run] = append(r.spans[run], s)
}

func (r *recorder) HookCreated(run, token string, at time.Duration) {
	r.mu.Lock()
	r.hooks[run] = token
	r.mu.Unlock()
}

func (r *recorder) StreamChunk(run string, c engine.ChunkSpan) {
	r.mu.Lock()
	r.chunks[run] = append(r.chunks[run], c)
	r.mu.Unlock()
}

func (r *recorder) RunFinished(run string, at time.Duration, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends[run] = at
	if f := r.done[run]; f != nil {
		f.Resolve()
	}
}

// opLog wraps a real world and records the order of its calls.
type opLog struct {
	world.World
	mu              sync.Mutex
	ops             []string
	publishing      atomic.Int32
	maxPublishing   atomic.Int32
	stepInputFlagOn atomic.Int32
	stepMessages    atomic.Int32
	// slowCreates holds every step_created write that long, so that a
	// publish made beside the creates is seen before the last of them.
	slowCreates time.Duration
}

func (o *opLog) add(op string) {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	o.mu.Unlock()
}

func (o *opLog) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	if ev.Kind == world.StepCreated && o.slowCreates > 0 {
		time.Sleep(o.slowCreates)
	}
	res, err := o.World.Append(ctx, run, ev, pre)
	if err == nil && ev.Kind == world.StepCreated {
		o.add("create " + ev.Entity)
	}
	return res, err
}

func (o *opLog) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	// Only step messages count towards the publish overlap: a finished
	// step's wake-up of the orchestrator may legitimately overlap the
	// dispatch loop's step publishes.
	step := len(m.Body) > 0 && m.Body[0] == 's'
	if step {
		n := o.publishing.Add(1)
		for {
			mx := o.maxPublishing.Load()
			if n <= mx || o.maxPublishing.CompareAndSwap(mx, n) {
				break
			}
		}
	}
	o.add("publish " + m.ID)
	// Hold the publish briefly so that overlapping publishes are observable.
	time.Sleep(200 * time.Microsecond)
	dup, err := o.World.Publish(ctx, m, opt)
	if step {
		o.publishing.Add(-1)
	}
	if step {
		o.stepMessages.Add(1)
		if engine.MessageCarriesStepInput(m.Body) {
			o.stepInputFlagOn.Add(1)
		}
	}
	return dup, err
}

type harness struct {
	w   world.World
	e   *engine.Engine
	rec *recorder
}

func start(t *testing.T, w world.World, f engine.Features) *harness {
	t.Helper()
	rec := newRecorder(w.Runtime())
	e, err := engine.New(engine.Config{World: w, Features: f, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Stop(context.Background())
		_ = w.Close()
	})
	return &harness{w: w, e: e, rec: rec}
}

// run starts a run and waits for it to finish.
func (h *harness) run(t *testing.T, id string, p engine.Program) {
	t.Helper()
	ctx := context.Background()
	done := h.rec.expect(id)
	if err := h.e.StartRun(ctx, id, p); err != nil {
		t.Fatal(err)
	}
	if !done.Wait(ctx, 2*time.Minute) {
		t.Fatalf("run %s did not finish", id)
	}
}

// checkExactlyOnce asserts every step body ran once and its completion is
// recorded once, and the run completed once.
func (h *harness) checkExactlyOnce(t *testing.T, id string, p engine.Program) {
	t.Helper()
	h.rec.mu.Lock()
	bodies := h.rec.bodies[id]
	h.rec.mu.Unlock()
	if len(bodies) != p.StepCount() {
		t.Fatalf("%s: %d distinct step bodies ran, want %d", id, len(bodies), p.StepCount())
	}
	for step, n := range bodies {
		if n != 1 {
			t.Errorf("%s: step %s body ran %d times", id, step, n)
		}
	}
	events, err := h.w.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	completed := map[string]int{}
	runDone := 0
	for _, ev := range events {
		switch ev.Kind {
		case world.StepCompleted:
			completed[ev.Entity]++
		case world.RunCompleted:
			runDone++
		}
	}
	if len(completed) != p.StepCount() {
		t.Errorf("%s: %d steps completed in the log, want %d", id, len(completed), p.StepCount())
	}
	for step, n := range completed {
		if n != 1 {
			t.Errorf("%s: step %s completed %d times", id, step, n)
		}
	}
	if runDone != 1 || events[len(events)-1].Kind != world.RunCompleted {
		t.Errorf("%s: run_completed %d times, last event %v", id, runDone, events[len(events)-1].Kind)
	}
}

func TestEveryVersionCompletesExactlyOnce(t *testing.T) {
	programs := []struct {
		name string
		p    engine.Program
	}{
		{"fanout1", engine.FanOut(1)},
		{"fanout20", engine.FanOut(20)},
		{"fanout256", engine.FanOut(256)},
		{"sequence50", engine.Sequence(50)},
		{"race20", raceThenStep(20)},
		{"payload", engine.Program{Stages: engine.Sequence(3).Stages, Payload: 10 << 10}},
		{"pipeline", engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
			Stream: &engine.StreamSpec{Chunks: 5, Sizes: []int{100}, Transform: true}}}}},
	}
	switchSets := []string{"none", "resilient-step-dispatch=0"}
	for _, v := range engine.Versions() {
		for _, sw := range switchSets {
			for _, guard := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/guard=%v", v.Name, sw, guard)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					set, err := engine.ParseSwitchSet(sw)
					if err != nil {
						t.Fatal(err)
					}
					h := start(t, mem.New(world.Options{Guard: guard}), set.Apply(v.Features))
					for _, pr := range programs {
						h.run(t, pr.name, pr.p)
						h.checkExactlyOnce(t, pr.name, pr.p)
					}
				})
			}
		}
	}
}

func withSerialLoop(f engine.Features) engine.Features {
	f.PublishLoop = engine.Serial
	return f
}

func TestDispatchPathFollowsVersionSwitchAndGuard(t *testing.T) {
	resilient, _ := engine.LookupVersion("resilient")
	baseline, _ := engine.LookupVersion("baseline")
	serial, _ := engine.LookupVersion("baseline-serial")
	killed, _ := engine.ParseSwitchSet("resilient-step-dispatch=0")
	cases := []struct {
		name         string
		f            engine.Features
		guard        bool
		wantParallel bool
		wantSerial   bool
	}{
		{"resilient", resilient.Features, false, true, false},
		{"resilient+kill-switch", killed.Apply(resilient.Features), false, false, false},
		{"resilient+guard", resilient.Features, true, false, false},
		{"baseline", baseline.Features, false, false, false},
		{"baseline-serial", serial.Features, false, false, true},
		{"baseline-serial+kill-switch", killed.Apply(serial.Features), false, false, true},
		{"resilient+serial-loop", withSerialLoop(resilient.Features), false, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ol := &opLog{World: mem.New(world.Options{Guard: c.guard}), slowCreates: 10 * time.Millisecond}
			h := start(t, ol, c.f)
			p := engine.FanOut(20)
			h.run(t, "r", p)
			h.checkExactlyOnce(t, "r", p)

			ol.mu.Lock()
			ops := append([]string(nil), ol.ops...)
			ol.mu.Unlock()
			lastCreate, firstStepPublish := -1, -1
			for i, op := range ops {
				if len(op) > 7 && op[:7] == "create " {
					lastCreate = i
				}
				if firstStepPublish < 0 && len(op) > 13 && op[:13] == "publish step/" {
					firstStepPublish = i
				}
			}
			if firstStepPublish < 0 {
				t.Fatalf("no step was published: %v", ops)
			}
			sequential := lastCreate < firstStepPublish
			if c.wantParallel && sequential {
				t.Errorf("parallel dispatch expected, but every step_created preceded the first publish")
			}
			if !c.wantParallel && !sequential {
				t.Errorf("sequential dispatch expected, but a step was published before the last step_created")
			}
			msgs, withInput := ol.stepMessages.Load(), ol.stepInputFlagOn.Load()
			if c.wantParallel && withInput != msgs {
				t.Errorf("parallel dispatch: %d of %d step messages carry the step input", withInput, msgs)
			}
			if !c.wantParallel && withInput != 0 {
				t.Errorf("sequential dispatch: %d step messages carry the step input", withInput)
			}
			if maxP := ol.maxPublishing.Load(); c.wantSerial && maxP != 1 {
				t.Errorf("serial publish loop: %d publishes overlapped", maxP)
			} else if !c.wantSerial && maxP < 2 {
				t.Errorf("concurrent publish expected, at most %d overlapped", maxP)
			}
		})
	}
}

// TestStepEndsWhenItsCompletionIsWritten: a step's span runs from its body's
// start to its step_completed write returning, so a slow completion write is
// inside the step (and the run's TTLS), as a backend's step entity records it.
func TestStepEndsWhenItsCompletionIsWritten(t *testing.T) {
	prof, err := profile.Parse("p.yaml", []byte("ops: {step_completed: {latency: {dist: fixed, value: 30ms}}}"))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, profile.Wrap(mem.New(world.Options{}), prof, 1), version(t, "pending-count"))
	h.run(t, "r", engine.FanOut(4))
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if len(h.rec.spans["r"]) != 4 {
		t.Fatalf("%d spans, want 4", len(h.rec.spans["r"]))
	}
	for _, s := range h.rec.spans["r"] {
		if d := s.End - s.Start; d < 30*time.Millisecond {
			t.Errorf("step %d: span %v, want >= the 30ms completion write", s.Index, d)
		}
	}
}

// lateReturn holds the return of step 0.0's step_completed write after the
// write landed: the task that wrote it loses the processor while another
// completer sees the stage done and finishes the run.
type lateReturn struct {
	world.World
	hold time.Duration
}

func (l *lateReturn) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	res, err := l.World.Append(ctx, run, ev, pre)
	if ev.Kind == world.StepCompleted && ev.Entity == "0.0" {
		time.Sleep(l.hold)
	}
	return res, err
}

// TestNoStepEndsAfterItsRun: a completion write that returns after its run
// finished ends the step at the run's finish — it was durable by then — so
// no step of a run ends after the run (TTLS never exceeds TTC).
func TestNoStepEndsAfterItsRun(t *testing.T) {
	h := start(t, &lateReturn{World: mem.New(world.Options{}), hold: 80 * time.Millisecond}, version(t, "pending-count"))
	h.run(t, "r", engine.FanOut(4))
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if len(h.rec.spans["r"]) != 4 {
		t.Fatalf("%d spans, want 4", len(h.rec.spans["r"]))
	}
	done := h.rec.ends["r"]
	for _, s := range h.rec.spans["r"] {
		if s.End > done {
			t.Errorf("step %d.%d ends at %v, after its run finished at %v", s.Stage, s.Index, s.End, done)
		}
	}
}

// TestEngineTakesThePlatformsConcurrency: with no concurrency of its own,
// the engine runs as many deliveries at once as the world's profile says
// the platform does (deliver.concurrency), not its default 64.
func TestEngineTakesThePlatformsConcurrency(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		most int // step bodies overlapping at most
	}{
		{"ops: {deliver: {concurrency: 2}}", 2},
		{"ops: {deliver: {latency: 0s}}", 16},
	} {
		t.Run(tt.yaml, func(t *testing.T) {
			prof, err := profile.Parse("p.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			f := version(t, "pending-count")
			f.InlineSteps = 0
			h := start(t, profile.Wrap(mem.New(world.Options{}), prof, 1), f)
			p := engine.FanOut(16)
			p.Body = engine.Body{Fixed: 50 * time.Millisecond}
			h.run(t, "r", p)
			h.rec.mu.Lock()
			spans := h.rec.spans["r"]
			h.rec.mu.Unlock()
			most := 0
			for _, a := range spans {
				n := 0
				for _, b := range spans {
					if b.Start <= a.Start && a.Start < b.End {
						n++
					}
				}
				most = max(most, n)
			}
			if most != tt.most {
				t.Errorf("%d step bodies ran at once at most, want %d", most, tt.most)
			}
		})
	}
}

func version(t *testing.T, name string) engine.Features {
	t.Helper()
	v, err := engine.LookupVersion(name)
	if err != nil {
		t.Fatal(err)
	}
	return v.Features
}
