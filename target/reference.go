package target

import (
	"context"
	"fmt"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
)

// Reference serves durabench's built-in engine (one version, on one world)
// over the protocol: `durabench target serve reference`. Its clock is the
// world's Runtime; step starts and ends come from the worker that ran the
// body, hook and run events from the engine's history.
type Reference struct {
	w       world.World
	version engine.Version
	eng     *engine.Engine
	sink    Sink
	// MaxBranches bounds the fan-outs it accepts (Info).
	MaxBranches int
}

// NewReference returns the reference engine of version v on w (not yet
// started: NewServer opens it).
func NewReference(w world.World, v engine.Version) *Reference {
	return &Reference{w: w, version: v, MaxBranches: 10000}
}

// Info names the engine, its version and every scenario of the book.
func (r *Reference) Info() Info {
	info := Info{Protocol: ProtocolVersion, Minor: ProtocolMinor, Engine: "durabench-reference", Version: r.version.Name,
		Clock: fmt.Sprintf("monotonic ns of the %s world's runtime", r.w.Name()), World: r.w.Name()}
	for _, s := range scenarios.All() {
		sc := Scenario{Name: s.Name}
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
func (r *Reference) Open(ctx context.Context, sink Sink) error {
	r.sink = sink
	eng, err := engine.New(engine.Config{World: r.w, Features: r.version.Features, Observer: refObserver{sink}})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	r.eng = eng
	return nil
}

// Start builds the scenario's program and starts the run.
func (r *Reference) Start(ctx context.Context, req StartRequest) error {
	sc, err := scenarios.Get(req.Scenario)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	p, _, err := sc.Build(scenarios.Values(req.Options))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if ok, why := r.Info().Supports(req.Scenario, req.Options); !ok {
		return fmt.Errorf("%w: %s", ErrUnsupported, why)
	}
	// Recorded first: the run may finish before StartRun returns. A run
	// that fails to start is forgotten by the server.
	r.sink.Event(req.Run, Event{Kind: EventRunStarted, At: ns(r.Now()), Source: SourceHistory})
	return r.eng.StartRun(ctx, req.Run, p)
}

// Resume resumes the hook through the engine.
func (r *Reference) Resume(ctx context.Context, _, token string, req ResumeRequest) error {
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
type refObserver struct{ sink Sink }

func (o refObserver) StepBody(run string, s engine.StepSpan) {
	ev := Event{Stage: s.Stage, Index: s.Index, Attempt: s.Attempt, Inline: s.Inline, Source: SourceWorker}
	ev.Kind, ev.At = EventStepStarted, ns(s.Start)
	o.sink.Event(run, ev)
	ev.Kind, ev.At = EventStepCompleted, ns(s.End)
	o.sink.Event(run, ev)
}

func (o refObserver) HookCreated(run, token string, at time.Duration) {
	o.sink.Event(run, Event{Kind: EventHookWaiting, At: ns(at), Token: token, Source: SourceHistory})
}

func (o refObserver) StreamChunk(run string, c engine.ChunkSpan) {
	o.sink.Event(run, Event{Kind: EventChunkRead, At: ns(c.Read), Written: ns(c.Written), Stage: c.Stage, Index: c.Index, Bytes: c.Bytes,
		Source: SourceWorker})
}

func (o refObserver) RunFinished(run string, at time.Duration, failed bool) {
	kind := EventRunCompleted
	if failed {
		kind = EventRunFailed
	}
	o.sink.Event(run, Event{Kind: kind, At: ns(at), Source: SourceHistory})
	o.sink.Finished(run, failed, "")
}
