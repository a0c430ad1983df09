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

// Resume retry policy: a transient failure of the resume (hook lookup,
// hook_received write, queue publish) is retried with the same resume id, as
// a real caller retries a webhook, so the world's dedup keeps the payload
// delivered once.
const (
	resumeAttempts     = 10
	resumeBackoff      = 10 * time.Millisecond
	resumeBackoffLimit = time.Second
)

// HookResumer is an engine.Observer that plays the outside caller of the
// hook scenarios: it passes every callback on to a Recorder and, when the
// engine reports a new hook, resumes it at once through the engine, in a
// task of its own spawned with the world's Runtime (so it runs in virtual
// time on sim).
//
// Each hook is resumed with a deterministic resume id ("drv/<token>") and a
// small fixed payload; the resume time recorded with Recorder.HookResumed is
// the Runtime time just before the first ResumeHook call, so
// resume_to_step includes the whole resume path (and any retries). A resume
// that fails for good marks the run failed (Recorder.Fail) rather than
// leaving it to stall.
//
// The engine is bound after engine.New (Bind), since the engine needs the
// observer to be created.
type HookResumer struct {
	rec *metrics.Recorder
	rt  world.Runtime

	// noSpans drops spans (Config.NoSpans).
	noSpans bool

	mu      sync.Mutex
	eng     HookTarget
	ctx     context.Context
	pending []hookRef // hooks reported before Bind
	resumed int
	retries int
	failed  int
}

type hookRef struct{ run, token string }

var (
	_ engine.SpanObserver = (*HookResumer)(nil)
	_ metrics.SpanSink    = (*HookResumer)(nil)
)

// NewHookResumer returns a HookResumer that records on rec and spawns its
// resume tasks on rt.
func NewHookResumer(rec *metrics.Recorder, rt world.Runtime) *HookResumer {
	return &HookResumer{rec: rec, rt: rt}
}

// HookTarget resumes hooks: the driver's engine, or a target reached over
// the target protocol.
type HookTarget interface {
	ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error
}

// Bind sets the engine that resumes hooks and the context resumes run
// under, and resumes any hook reported before.
func (h *HookResumer) Bind(ctx context.Context, e HookTarget) {
	h.mu.Lock()
	h.eng, h.ctx = e, ctx
	pending := h.pending
	h.pending = nil
	h.mu.Unlock()
	for _, p := range pending {
		h.spawn(p.run, p.token)
	}
}

// ResumeID is the resume id HookResumer uses for token.
func ResumeID(token string) string { return "drv/" + token }

// HookStats counts the resumer's work.
type HookStats struct {
	// Resumed is the number of hooks resumed successfully.
	Resumed int
	// Retries is the number of ResumeHook calls repeated after a transient
	// failure.
	Retries int
	// Failed is the number of hooks whose resume failed for good.
	Failed int
}

// Stats returns the counts so far.
func (h *HookResumer) Stats() HookStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HookStats{Resumed: h.resumed, Retries: h.retries, Failed: h.failed}
}

// StepBody forwards to the Recorder.
func (h *HookResumer) StepBody(run string, s engine.StepSpan) { h.rec.StepBody(run, s) }

// StreamChunk forwards to the Recorder.
func (h *HookResumer) StreamChunk(run string, c engine.ChunkSpan) { h.rec.StreamChunk(run, c) }

// Spans passes the engine's spans on to the Recorder (engine.SpanObserver),
// unless spans are off.
func (h *HookResumer) Spans(run string, spans []engine.Span) {
	if !h.noSpans {
		h.rec.Spans(run, spans)
	}
}

// engineObserver is what the engine observes its runs with: h, or with
// spans off h without its Spans method (an engine.Observer that is no
// engine.SpanObserver: the engine then records none).
func (h *HookResumer) engineObserver() engine.Observer {
	if h.noSpans {
		return spanless{h}
	}
	return h
}

// spanless hides its Observer's Spans method.
type spanless struct{ engine.Observer }

// AddSpans passes a target's spans on to the Recorder (metrics.SpanSink),
// or drops them when the sweep records none (a target may send spans it
// was not asked for).
func (h *HookResumer) AddSpans(run string, spans []metrics.Span) {
	if h.noSpans {
		return
	}
	h.rec.AddSpans(run, spans)
}

// RunFinished forwards to the Recorder.
func (h *HookResumer) RunFinished(run string, at time.Duration, failed bool) {
	h.rec.RunFinished(run, at, failed)
}

// HookCreated records the hook and resumes it in a new task. It does not
// block the engine's task that reported it.
func (h *HookResumer) HookCreated(run, token string, at time.Duration) {
	h.rec.HookCreated(run, token, at)
	h.mu.Lock()
	if h.eng == nil {
		h.pending = append(h.pending, hookRef{run, token})
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.spawn(run, token)
}

func (h *HookResumer) spawn(run, token string) {
	h.rt.Go(func() { h.resume(run, token) })
}

// resume calls ResumeHook until it succeeds, fails for good, or the run is
// over.
func (h *HookResumer) resume(run, token string) {
	h.mu.Lock()
	e, ctx := h.eng, h.ctx
	h.mu.Unlock()
	id := ResumeID(token)
	payload := []byte(`{"resume":"` + id + `"}`)
	h.rec.HookResumed(run, token, h.rt.Now())
	backoff := resumeBackoff
	var err error
	for attempt := 1; attempt <= resumeAttempts; attempt++ {
		if attempt > 1 {
			h.mu.Lock()
			h.retries++
			h.mu.Unlock()
			if h.rt.Sleep(ctx, backoff) != nil {
				break
			}
			backoff = min(2*backoff, resumeBackoffLimit)
		}
		err = e.ResumeHook(ctx, token, id, payload)
		if err == nil || errors.Is(err, world.ErrGone) {
			// Gone: the run ended meanwhile (a retry after a resume that
			// did land); nothing is left to resume.
			h.mu.Lock()
			h.resumed++
			h.mu.Unlock()
			return
		}
		if !world.IsTransient(err) || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return // the cell is over; an unfinished run is a stall, not a failure
	}
	h.mu.Lock()
	h.failed++
	h.mu.Unlock()
	h.rec.Fail(run, h.rt.Now(), fmt.Errorf("driver: resume hook %s: %w", token, err))
}
