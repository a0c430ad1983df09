// Package engine is durabench's reference durable runtime: a replaying
// orchestrator, a step consumer, dispatch strategies, named versions and kill
// switches (DESIGN.md §4). It talks to its backend only through world.World
// and waits, sleeps, spawns and reads the clock only through world.Runtime.
package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/world"
)

// Config configures an Engine.
type Config struct {
	World    world.World
	Features Features
	// Observer receives engine-side timestamps; nil discards them.
	Observer Observer
	// Concurrency is the number of queue deliveries handled at once, like a
	// deployment's function concurrency (default: the world's
	// Capabilities().Concurrency when its profile sets one, else
	// DefaultConcurrency). A
	// delivery holds its slot while it loads the log, so bounded slots are
	// what turns O(N²) log loads into late branch starts at high fan-out.
	Concurrency int
	// Deployment names the deployment runs are pinned to (default "durabench").
	Deployment string
	// Seed seeds step-body jitter.
	Seed int64
}

// DefaultConcurrency is the default number of deliveries handled at once.
const DefaultConcurrency = 64

// Engine runs workflow programs on a world.
type Engine struct {
	cfg Config
	w   world.World
	// base is the world below the span wrapper (w itself without spans):
	// the calls a fan-out's dispatch makes from a goroutine per step are
	// timed in the caller's own frame (spanRec.call) on it, so that
	// recording them adds no frame to those goroutines' small stacks.
	base world.World
	rt   world.Runtime
	f    Features // effective features (after the world's guard)
	obs  Observer
	sub  world.Subscription
	// inlineWindow is how long after its start an invocation may begin an
	// inline step: half the world's visibility timeout (0: no limit).
	inlineWindow time.Duration

	// programs caches decoded programs by run, so a consumer that skips the
	// runs.get (run context) still knows what to execute.
	programs sync.Map // run -> *programInfo

	rngMu sync.Mutex // short critical section, never held across a wait
	rng   *rand.Rand

	stats counters

	// end holds a run's finish until the step spans still being written
	// are reported (see endings).
	end endings

	// spans records the engine's spans when the observer takes them
	// (SpanObserver); nil otherwise (spans.go).
	spans *spanRec

	// unconfirmed holds the runs whose terminal write by this engine failed
	// transiently (run -> failed): the write may have landed with its answer
	// lost (a connection reset after the commit). The redelivery that finds
	// the run finished reports it (gone), else nobody would: the writer saw
	// an error, and every later delivery sees a finished run (make chaos:
	// PostgreSQL behind a proxy resetting connections left 2 of 50 runs
	// completed in the world and unfinished in the results).
	unconfirmed sync.Map

	// inline holds the steps an invocation of this engine may run inline,
	// from before their step_created to the end of their body. Such a step
	// has no message; an activation that finds its stage dispatched (a
	// race's continuation, looking for losers a dead dispatch left behind)
	// republishes created, unfinished steps — and a step held here is
	// neither dead nor left behind: publishing it ran its body twice
	// (TestEveryVersionCompletesExactlyOnce, race20, 1 in 30). Another
	// engine sharing the world cannot see it and may still republish it
	// (at least once, as every redelivery).
	inline holds
}

// stepKey names a run's step (stage, index) without building a string.
type stepKey struct {
	run          string
	stage, index int
}

// holds counts holders per step; a step is held while any holds it.
type holds struct {
	mu sync.Mutex // short critical section, never held across a wait
	n  map[stepKey]int
}

func (h *holds) add(key stepKey, d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[stepKey]int{}
	}
	if h.n[key] += d; h.n[key] <= 0 {
		delete(h.n, key)
	}
}

func (h *holds) held(key stepKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[key] > 0
}

// counters count the engine's recovery paths since it was created (the
// package's tests read them through Stats).
type counters struct {
	createsSwallowed, reensures, inbandRecoveries, handoffs, republished atomic.Int64
}

// programInfo is a decoded program with each stage's first step ordinal
// and the names its steps' world operations carry.
type programInfo struct {
	*Program
	seqBase []int
	names   []stageNames
	// payload is every step's input and output (Program.Payload bytes),
	// built once per run.
	payload []byte
}

// stepNames are the strings one step's world operations carry, and the
// step they name.
type stepNames struct {
	id           string // correlation id "<stage>.<index>" (the events' Entity)
	create       string // step_created event ID
	complete     string // step_completed event ID
	stage, index int32
}

func newStepNames(s, idx int) stepNames {
	id := stepID(s, idx)
	return stepNames{id: id, create: createEventID(id), complete: completeEventID(id), stage: int32(s), index: int32(idx)}
}

// stageNames holds a stage's step names, built the first time the stage is
// reached, so each is built once per run rather than once per operation.
type stageNames struct {
	once  sync.Once
	steps []stepNames
}

// step returns the names of step (s, idx).
func (p *programInfo) step(s, idx int) stepNames {
	if s < 0 || s >= len(p.names) {
		return newStepNames(s, idx)
	}
	sn := &p.names[s]
	sn.once.Do(func() {
		sn.steps = make([]stepNames, stageSteps(p.Stages[s]))
		for i := range sn.steps {
			sn.steps[i] = newStepNames(s, i)
		}
	})
	if idx < 0 || idx >= len(sn.steps) {
		return newStepNames(s, idx)
	}
	return sn.steps[idx]
}

// stepNames returns the names of step (s, idx) of run from the cached
// program, or builds them when the run's program is not cached (no world
// call: the caller may not know the program yet).
func (e *Engine) stepNames(run string, s, idx int) stepNames {
	if p, ok := e.programs.Load(run); ok {
		return p.(*programInfo).step(s, idx)
	}
	return newStepNames(s, idx)
}

func newProgramInfo(p Program) *programInfo {
	info := &programInfo{Program: &p, seqBase: make([]int, len(p.Stages)), names: make([]stageNames, len(p.Stages))}
	n := 0
	for i, s := range p.Stages {
		info.seqBase[i] = n
		n += stageSteps(s)
	}
	if p.Payload > 0 {
		info.payload = payloadBytes(p.Payload)
	}
	return info
}

// seq is step (s, idx)'s ordinal in the whole run.
func (p *programInfo) seq(s, idx int) int { return p.seqBase[s] + idx }

// New validates cfg and returns an engine; Start begins consuming.
func New(cfg Config) (*Engine, error) {
	if cfg.World == nil {
		return nil, fmt.Errorf("engine: no world")
	}
	if err := cfg.Features.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
		if c := cfg.World.Capabilities().Concurrency; c > 0 {
			cfg.Concurrency = c // the platform's, from the world's profile
		}
	}
	if cfg.Deployment == "" {
		cfg.Deployment = "durabench"
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	caps := cfg.World.Capabilities()
	w, spans := cfg.World, newSpanRec(cfg.Observer, cfg.World)
	if spans != nil {
		w = &spanWorld{World: w, r: spans} // every call of a task is timed
	}
	return &Engine{cfg: cfg, w: w, base: cfg.World, rt: cfg.World.Runtime(), spans: spans,
		f: Effective(cfg.Features, caps), obs: cfg.Observer, inlineWindow: caps.VisibilityTimeout / 2,
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15)),
		end: endings{seed: maphash.MakeSeed(), now: cfg.World.Runtime().Now}}, nil
}

// Effective returns the features the engine really uses on a world with caps:
// under an enforced guard, dispatch stays sequential.
func Effective(f Features, caps world.Capabilities) Features {
	if caps.Guard {
		f.Dispatch = Sequential
	}
	return f
}

// Features returns the effective features.
func (e *Engine) Features() Features { return e.f }

type nopObserver struct{}

func (nopObserver) StepBody(string, StepSpan)                 {}
func (nopObserver) HookCreated(string, string, time.Duration) {}
func (nopObserver) StreamChunk(string, ChunkSpan)             {}
func (nopObserver) RunFinished(string, time.Duration, bool)   {}

// Start subscribes the engine's consumer to the world's queue.
func (e *Engine) Start(ctx context.Context) error {
	sub, err := e.w.Consume(ctx, world.ConsumeOptions{Concurrency: e.cfg.Concurrency}, e.handle)
	if err != nil {
		return fmt.Errorf("engine: consume: %w", err)
	}
	e.sub = sub
	return nil
}

// Stop stops consuming and waits for running handlers.
func (e *Engine) Stop(ctx context.Context) error {
	if e.sub == nil {
		return nil
	}
	return e.sub.Stop(ctx)
}

// specVersion is the engine protocol version stamped on runs.
const specVersion = 1

// StartRun creates run id with program p and enqueues its first orchestrator
// invocation. The caller takes the run's anchor (t0) before calling.
func (e *Engine) StartRun(ctx context.Context, id string, p Program) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("engine: run %s: %w", id, err)
	}
	info := newProgramInfo(p)
	e.spans.expect(id, info)
	ctx, task := e.spans.begin(ctx, SpanStart, id)
	defer task.end()
	e.programs.Store(id, info)
	err := e.w.CreateRun(ctx, world.Run{ID: id, Deployment: e.cfg.Deployment, SpecVersion: specVersion, Input: p.encode()})
	if err != nil {
		e.programs.Delete(id)
		return fmt.Errorf("engine: create run %s: %w", id, err)
	}
	m := message{kind: kindWorkflow, run: id}
	if _, err := e.w.Publish(ctx, world.Message{ID: "wf/" + id + "/start", Run: id, Body: m.encode()}, world.PublishOptions{}); err != nil {
		return fmt.Errorf("engine: start run %s: %w", id, err)
	}
	return nil
}

// ResumeHook resumes the hook token with payload, deduplicated by resumeID.
// With lazy hook resume the hook_received write and the orchestrator
// message (which carries the resume) go out in parallel; a transient write
// failure is left for the consumer to re-ensure. Otherwise the write comes
// first and the publish after it.
func (e *Engine) ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error {
	ctx, task := e.spans.begin(ctx, SpanResume, "")
	defer task.end()
	run, err := e.w.HookRun(ctx, token)
	if err != nil {
		return fmt.Errorf("engine: resume hook %s: %w", token, err)
	}
	task.setRun(run)
	ev := world.Event{Kind: world.HookReceived, ID: "h/" + resumeID, Entity: token, Data: payload}
	key := "wf/" + run + "/hook/" + resumeID
	if !e.f.LazyHookResume {
		if _, err := e.w.Append(ctx, run, ev, world.Precondition{}); err != nil {
			return fmt.Errorf("engine: hook_received %s: %w", token, err)
		}
		m := message{kind: kindWorkflow, run: run}
		_, err := e.w.Publish(ctx, world.Message{ID: key, Run: run, Body: m.encode()}, world.PublishOptions{})
		return err
	}
	m := message{kind: kindWorkflow, run: run, hookToken: token, resumeID: resumeID, payload: payload}
	var werr, perr error
	g := e.rt.NewGroup()
	g.Go(func() error { _, werr = e.w.Append(ctx, run, ev, world.Precondition{}); return nil })
	g.Go(func() error {
		_, perr = e.w.Publish(ctx, world.Message{ID: key, Run: run, Body: m.encode()}, world.PublishOptions{})
		return nil
	})
	_ = g.Wait()
	if perr != nil {
		return fmt.Errorf("engine: resume hook %s: publish: %w", token, perr)
	}
	if werr != nil && !world.IsTransient(werr) && !errors.Is(werr, world.ErrGone) {
		return fmt.Errorf("engine: hook_received %s: %w", token, werr)
	}
	return nil
}

// handle is the queue consumer for every engine message.
func (e *Engine) handle(ctx context.Context, d world.Delivery) error {
	m, err := decodeMessage(d.Body)
	if err != nil {
		return nil // a message no engine version wrote: drop it, never loop on it
	}
	if m.kind == kindStep {
		return e.onStep(ctx, &m, d)
	}
	return e.onWorkflow(ctx, &m)
}

// onWorkflow is an orchestrator invocation from the queue.
func (e *Engine) onWorkflow(ctx context.Context, m *message) error {
	run, err := e.w.GetRun(ctx, m.run)
	if err != nil {
		if errors.Is(err, world.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("workflow %s: runs.get: %w", m.run, err)
	}
	if run.Status.Terminal() {
		e.gone(m.run)
		return nil
	}
	prog, err := e.programFrom(m.run, run.Input)
	if err != nil {
		e.failRun(ctx, m.run, err)
		return nil
	}
	inv := e.newInvocation(m.run, prog)
	if m.hookToken != "" {
		// A lazily resumed hook: replay re-ensures hook_received (deduplicated
		// by the resume id) unless the log it loads already has it.
		inv.ensure = &world.Event{Kind: world.HookReceived, ID: "h/" + m.resumeID, Entity: m.hookToken, Data: m.payload}
	}
	return e.replay(ctx, inv)
}

// program returns the run's program from the cache, or fetches the run.
func (e *Engine) program(ctx context.Context, run string) (*programInfo, error) {
	if p, ok := e.programs.Load(run); ok {
		return p.(*programInfo), nil
	}
	r, err := e.w.GetRun(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("runs.get %s: %w", run, err)
	}
	return e.programFrom(run, r.Input)
}

// programFrom decodes (or finds cached) the program stored as a run's input.
func (e *Engine) programFrom(run string, input []byte) (*programInfo, error) {
	if p, ok := e.programs.Load(run); ok {
		return p.(*programInfo), nil
	}
	p, err := decodeProgram(input)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	info := newProgramInfo(p)
	actual, _ := e.programs.LoadOrStore(run, info)
	return actual.(*programInfo), nil
}

// failRun ends a run that cannot execute.
func (e *Engine) failRun(ctx context.Context, run string, cause error) {
	res, err := e.w.Append(ctx, run, world.Event{Kind: world.RunFailed, ID: idRunFailed, Data: []byte(cause.Error())}, world.Precondition{})
	switch {
	case err == nil:
		if _, was := e.unconfirmed.LoadAndDelete(run); !res.Duplicate || was {
			e.finish(run, true)
		}
	case world.IsTransient(err):
		e.unconfirmed.Store(run, true)
	}
}

// gone is called where this engine finds run finished (its status, a
// terminal event in its log, a write refused as ErrGone): if its own
// terminal write of the run failed transiently, that write landed, and the
// run's end is reported now — later than it happened, never lost.
func (e *Engine) gone(run string) {
	if failed, ok := e.unconfirmed.LoadAndDelete(run); ok {
		e.finish(run, failed.(bool))
	}
}
