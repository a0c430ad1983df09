package reference

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
)

// Reference serves durabench's built-in engine (one version, on one world)
// over the protocol: `durabench target serve reference`. Its clock is the
// world's Runtime; step starts and ends come from the worker that ran the
// body, hook and run events from the engine's history, and the engine's
// spans (engine.SpanObserver) are sent as span events (protocol 1.2):
// where each run's time went, on the same clock.
type Reference struct {
	w       world.World
	version engine.Version
	eng     *engine.Engine
	sink    protocol.Sink
	obs     *refObserver
	// MaxBranches bounds the fan-outs it accepts (Info).
	MaxBranches int
	// NoSpans, set before the server opens it, runs the engine without
	// spans: it sends no span event (a target of 1.2 may send none).
	NoSpans bool

	// programs holds what Start built for a scenario and its options (or
	// why it refused them): the runs of a cell share one program, and
	// building it and checking it against Info for every start took a
	// tenth of this target's CPU at 10,000 runs/s.
	mu       sync.Mutex
	programs []built
}

// built is a scenario's program for one set of options (under one
// MaxBranches), or why Start refuses them.
type built struct {
	scenario    string
	opts        map[string]string
	maxBranches int
	p           engine.Program
	err         error
}

// maxPrograms bounds the programs Reference keeps: a driver sends a few
// sets of options, a fuzzer any number.
const maxPrograms = 256

// New returns the reference engine of version v on w (not yet
// started: NewServer opens it).
func New(w world.World, v engine.Version) *Reference {
	return &Reference{w: w, version: v, MaxBranches: 10000}
}

// Info names the engine, its version and every scenario of the book.
func (r *Reference) Info() protocol.Info {
	info := protocol.Info{Protocol: protocol.ProtocolVersion, Minor: protocol.ProtocolMinor, Engine: "durabench-reference", Version: r.version.Name,
		Clock: fmt.Sprintf("monotonic ns of the %s world's runtime", r.w.Name()), World: r.w.Name()}
	for _, s := range scenarios.All() {
		sc := protocol.Scenario{Name: s.Name}
		if s.HasOption("branches") {
			sc.Max = map[string]int{"branches": r.MaxBranches}
		}
		info.Scenarios = append(info.Scenarios, sc)
	}
	return info
}

// Now is the world's runtime clock.
func (r *Reference) Now() time.Duration { return r.w.Runtime().Now() }

// Open starts the engine with an observer that reports to sink.
func (r *Reference) Open(ctx context.Context, sink protocol.Sink) error {
	r.sink = sink
	r.obs = &refObserver{sink: sink}
	r.obs.batch, _ = sink.(eventsSink)
	var obs engine.Observer = r.obs
	if !r.NoSpans {
		obs = spanObserver{r.obs}
	}
	eng, err := engine.New(engine.Config{World: r.w, Features: r.version.Features, Observer: obs})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	r.eng = eng
	return nil
}

// Start builds the scenario's program (once per scenario and options)
// and starts the run.
func (r *Reference) Start(ctx context.Context, req protocol.StartRequest) error {
	p, err := r.program(req.Scenario, req.Options)
	if err != nil {
		return err
	}
	// Recorded first: the run may finish before StartRun returns. A run
	// that fails to start is forgotten by the server.
	if !r.NoSpans && req.Spans {
		r.obs.begin(req.Run)
	}
	r.sink.Event(req.Run, protocol.Event{Kind: protocol.EventRunStarted, At: int64(r.Now()), Source: protocol.SourceHistory})
	err = r.eng.StartRun(ctx, req.Run, p)
	if err != nil {
		r.obs.end(req.Run)
	}
	return err
}

// program is the scenario's program for opts, built and checked against
// Info the first time, or why the target refuses them (ErrUnsupported).
func (r *Reference) program(scenario string, opts map[string]string) (engine.Program, error) {
	r.mu.Lock()
	for _, b := range r.programs {
		if b.scenario == scenario && b.maxBranches == r.MaxBranches && maps.Equal(b.opts, opts) {
			r.mu.Unlock()
			return b.p, b.err
		}
	}
	r.mu.Unlock()
	b := built{scenario: scenario, opts: maps.Clone(opts), maxBranches: r.MaxBranches}
	b.p, b.err = r.build(scenario, opts)
	r.mu.Lock()
	if len(r.programs) >= maxPrograms {
		r.programs = nil
	}
	r.programs = append(r.programs, b)
	r.mu.Unlock()
	return b.p, b.err
}

// build builds the scenario's program for opts and checks them against
// Info.
func (r *Reference) build(scenario string, opts map[string]string) (engine.Program, error) {
	sc, err := scenarios.Get(scenario)
	if err != nil {
		return engine.Program{}, fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	p, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		return engine.Program{}, fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	if ok, why := r.Info().Supports(scenario, opts); !ok {
		return engine.Program{}, fmt.Errorf("%w: %s", protocol.ErrUnsupported, why)
	}
	return p, nil
}

// Resume resumes the hook through the engine.
func (r *Reference) Resume(ctx context.Context, _, token string, req protocol.ResumeRequest) error {
	return r.eng.ResumeHook(ctx, token, req.ResumeID, req.Payload)
}

// Close stops the engine and closes the world.
func (r *Reference) Close(ctx context.Context) error {
	if r.eng != nil {
		_ = r.eng.Stop(ctx)
	}
	return r.w.Close()
}

// refObserver turns the engine's observer callbacks into protocol events.
type refObserver struct {
	sink protocol.Sink
	// batch is sink's Events, when it has it: a run's spans are recorded
	// at once.
	batch eventsSink
	// runs are the runs whose spans are sent (run -> *runSpans), from
	// their start to their terminal event.
	runs sync.Map
}

// eventsSink records several events of a run at once (protocol.Server's
// Events).
type eventsSink interface {
	Events(run string, evs []protocol.Event)
}

// runSpans collects a run's spans until it ends, in the critical path's
// terms (metrics.FromEngine: each task's categories and structure).
type runSpans struct {
	mu   sync.Mutex
	done bool // the run's spans are sent: none after its terminal event
	buf  []metrics.Span
}

// begin collects run's spans from now on.
func (o *refObserver) begin(run string) { o.runs.Store(run, &runSpans{}) }

// end stops collecting run's spans and returns them (nil: none asked).
func (o *refObserver) end(run string) []metrics.Span {
	v, ok := o.runs.LoadAndDelete(run)
	if !ok {
		return nil
	}
	rs := v.(*runSpans)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.done = true
	return rs.buf
}

// spans collects a task's spans (engine.SpanObserver). A run's spans are
// sent together at its end, just before its terminal event: a task costs
// the engine an append while the run goes on. A task still running when
// its run finished reports what it has just before RunFinished, and again
// when it ends, after the terminal event: that report is dropped.
func (o *refObserver) spans(run string, spans []engine.Span) {
	v, ok := o.runs.Load(run)
	if !ok {
		return
	}
	rs := v.(*runSpans)
	rs.mu.Lock()
	if !rs.done {
		rs.buf = metrics.FromEngine(rs.buf, spans)
	}
	rs.mu.Unlock()
}

// spanEvents are a run's spans as span events: their ids the run's own,
// 1, 2, 3, … in the order they were reported (the engine's are unique in
// the engine, and long); a span reported twice is its later report (a
// task's own span, reported when its run finished and again when it
// ended), and a reference to a span never reported is left out.
func spanEvents(buf []metrics.Span) []protocol.Event {
	ids := make(map[uint64]int64, len(buf))
	last := make(map[uint64]int, len(buf)) // the last report of each id
	for i := range buf {
		if id := buf[i].ID; id != 0 {
			if _, ok := ids[id]; !ok {
				ids[id] = int64(len(ids) + 1)
			}
			last[id] = i
		}
	}
	evs := make([]protocol.Event, 0, len(buf))
	for i := range buf {
		sp := &buf[i]
		if sp.ID != 0 && last[sp.ID] != i {
			continue // superseded
		}
		ev := protocol.Event{Kind: protocol.EventSpan, At: int64(sp.Start), End: int64(sp.End), Source: protocol.SourceSDK,
			Category: sp.Category, Name: sp.Name, Wait: int64(sp.Wait), SpanID: ids[sp.ID], Parent: ids[sp.Parent], After: ids[sp.After]}
		if sp.Stage >= 0 {
			ev.Stage, ev.Index = sp.Stage, max(sp.Index, 0)
		}
		evs = append(evs, ev)
	}
	return evs
}

// spanObserver is refObserver that also receives the engine's spans.
type spanObserver struct{ *refObserver }

// Spans collects a task's spans (engine.SpanObserver).
func (o spanObserver) Spans(run string, spans []engine.Span) { o.spans(run, spans) }

func (o *refObserver) StepBody(run string, s engine.StepSpan) {
	ev := protocol.Event{Stage: s.Stage, Index: s.Index, Attempt: s.Attempt, Inline: s.Inline, Source: protocol.SourceWorker}
	ev.Kind, ev.At = protocol.EventStepStarted, int64(s.Start)
	o.sink.Event(run, ev)
	ev.Kind, ev.At = protocol.EventStepCompleted, int64(s.End)
	o.sink.Event(run, ev)
}

func (o *refObserver) HookCreated(run, token string, at time.Duration) {
	o.sink.Event(run, protocol.Event{Kind: protocol.EventHookWaiting, At: int64(at), Token: token, Source: protocol.SourceHistory})
}

func (o *refObserver) StreamChunk(run string, c engine.ChunkSpan) {
	o.sink.Event(run, protocol.Event{Kind: protocol.EventChunkRead, At: int64(c.Read), Written: int64(c.Written), Stage: c.Stage, Index: c.Index, Bytes: c.Bytes,
		Source: protocol.SourceWorker})
}

func (o *refObserver) RunFinished(run string, at time.Duration, failed bool) {
	// The run's spans, before its terminal event; none after it.
	if evs := spanEvents(o.end(run)); len(evs) > 0 {
		if o.batch != nil {
			o.batch.Events(run, evs)
		} else {
			for _, ev := range evs {
				o.sink.Event(run, ev)
			}
		}
	}
	kind := protocol.EventRunCompleted
	if failed {
		kind = protocol.EventRunFailed
	}
	o.sink.Event(run, protocol.Event{Kind: kind, At: int64(at), Source: protocol.SourceHistory})
	o.sink.Finished(run, failed, "")
}
