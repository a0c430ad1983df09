package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/durabench/durabench/world"
)

// onStep is the step consumer: claim with step_started, run the body, write
// step_completed, and continue the run when this was the stage's last step.
func (e *Engine) onStep(ctx context.Context, m *message, d world.Delivery) error {
	var prog *programInfo
	if !m.runContext {
		// The legacy prologue: one blocking runs.get before the claim.
		run, err := e.w.GetRun(ctx, m.run)
		if err != nil {
			if errors.Is(err, world.ErrNotFound) {
				return nil // nothing to run
			}
			return fmt.Errorf("step %s: runs.get: %w", m.run, err)
		}
		if run.Status.Terminal() {
			e.gone(m.run)
			return nil
		}
		if prog, err = e.programFrom(m.run, run.Input); err != nil {
			return nil // undecodable run input: nothing can execute it
		}
	}
	names := e.stepNames(m.run, m.stage, m.index)
	id := names.id
	if m.stepInput && d.Attempt > 1 && e.f.Recovery != RecoveryNone {
		// A redelivery: re-ensure step_created eagerly (a round trip cheaper
		// than a rejected claim).
		if err := e.ensureCreated(ctx, m, names); err != nil {
			return err
		}
	}
	err := e.claim(ctx, m.run, id)
	if errors.Is(err, world.ErrNotFound) && m.stepInput && e.f.Recovery == RecoveryInband {
		// In-band recovery, whatever the attempt: materialize step_created
		// from the message and retry the claim once in this delivery.
		if err = e.ensureCreated(ctx, m, names); err == nil {
			e.stats.inbandRecoveries.Add(1)
			err = e.claim(ctx, m.run, id)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, world.ErrConflict):
		// Already terminal: a redelivery of a step whose earlier delivery
		// completed it. Make sure the run did not lose its continuation.
		return e.recheck(ctx, m)
	case errors.Is(err, world.ErrGone):
		e.gone(m.run)
		return nil
	default:
		return err
	}
	if prog == nil {
		if prog, err = e.program(ctx, m.run); err != nil {
			if errors.Is(err, world.ErrNotFound) {
				return nil
			}
			return err
		}
	}
	inv := e.newInvocation(m.run, prog)
	last, err := e.execute(ctx, inv, m.stage, m.index, false, d.Attempt)
	if err != nil || !last {
		return err
	}
	return e.continueRun(ctx, inv)
}

// continueRun is the last completer continuing the run with an inline
// replay. When that fails it hands the continuation to the queue, so a
// failure here never loses the run.
func (e *Engine) continueRun(ctx context.Context, inv *invocation) error {
	inv.prevStep = true
	err := e.replay(ctx, inv)
	if err == nil {
		return nil
	}
	e.stats.handoffs.Add(1)
	// The failed replay may have created steps it never published: the
	// hand-off's activation finds the stage dispatched and republishes them.
	m := message{kind: kindWorkflow, run: inv.run, recover: true}
	key := "wf/" + inv.run + "/cont/" + strconv.FormatInt(int64(e.rt.Now()), 10)
	if _, perr := e.w.Publish(ctx, world.Message{ID: key, Run: inv.run, Body: m.encode()}, world.PublishOptions{}); perr != nil {
		return fmt.Errorf("continue %s: %w (hand-off failed: %v)", inv.run, err, perr)
	}
	return nil
}

// recheck replays a run whose step was already complete when a delivery
// tried to claim it, in case the completing delivery died before continuing.
func (e *Engine) recheck(ctx context.Context, m *message) error {
	prog, err := e.program(ctx, m.run)
	if err != nil {
		if errors.Is(err, world.ErrNotFound) {
			return nil
		}
		return err
	}
	return e.replay(ctx, e.newInvocation(m.run, prog))
}

// claim appends step_started.
func (e *Engine) claim(ctx context.Context, run, id string) error {
	if _, err := e.w.Append(ctx, run, world.Event{Kind: world.StepStarted, Entity: id}, world.Precondition{}); err != nil {
		return fmt.Errorf("step_started %s/%s: %w", run, id, err)
	}
	return nil
}

// ensureCreated materializes step_created from a message's step input.
// An existing step (duplicate ID, or created without one) is success.
func (e *Engine) ensureCreated(ctx context.Context, m *message, names stepNames) error {
	var input []byte
	if p, ok := e.programs.Load(m.run); ok {
		input = p.(*programInfo).payload
	}
	_, err := e.createStep(ctx, m.run, names, input, world.Precondition{})
	if err == nil || errors.Is(err, world.ErrConflict) {
		e.stats.reensures.Add(1)
		return nil
	}
	if errors.Is(err, world.ErrGone) {
		return nil
	}
	return err
}

// runInline claims and runs a step in the orchestrator's task.
func (e *Engine) runInline(ctx context.Context, inv *invocation, s, idx int) (last bool, err error) {
	if err := e.claim(ctx, inv.run, inv.prog.step(s, idx).id); err != nil {
		if errors.Is(err, world.ErrConflict) {
			return false, nil
		}
		return false, err
	}
	return e.execute(ctx, inv, s, idx, true, 1)
}

// execute runs a claimed step's body, reports it, writes step_completed and
// tells whether this completion was the last of its stage.
func (e *Engine) execute(ctx context.Context, inv *invocation, s, idx int, inline bool, attempt int) (bool, error) {
	span := StepSpan{Stage: s, Index: idx, Seq: inv.prog.seq(s, idx), Inline: inline && inv.prevStep, Attempt: attempt}
	span.Start = e.rt.Now()
	if err := e.body(ctx, inv, s, idx); err != nil {
		return false, err
	}
	since := e.rt.Now()
	e.spans.body(ctx, s, idx, span.Start, since)
	inv.prevStep = true

	names := inv.prog.step(s, idx)
	id := names.id
	e.end.begin(inv.run, since)
	// The step ends when its completion is written: until then a crash
	// runs it again. Under a loaded backend that write waits its turn, and
	// that wait is the step's (what the reference's step entities record,
	// and what a target's step_completed is).
	res, end, err := e.appendFrom(ctx, inv.run, world.Event{Kind: world.StepCompleted, ID: names.complete, Entity: id,
		Data: inv.prog.payload}, s, idx, since)
	span.End = e.end.capEnd(inv.run, end)
	e.obs.StepBody(inv.run, span)
	if held, at, failed := e.end.end(inv.run, since); held {
		e.spans.finished(inv.run)
		e.obs.RunFinished(inv.run, at, failed)
		e.spans.forget(inv.run)
	}
	switch {
	case err == nil:
	case errors.Is(err, world.ErrConflict), errors.Is(err, world.ErrGone):
		return false, nil
	default:
		return false, fmt.Errorf("step_completed %s/%s: %w", inv.run, id, err)
	}
	if res.Duplicate {
		return false, nil // another delivery completed it and owns the continuation
	}
	stage := inv.prog.Stages[s]
	if stage.Race {
		// A race continues the run twice: when its first step completes
		// (the run goes on) and when its last does (the run may end). With
		// positions assigned at commit, exactly one completer sees each
		// count up to its own position.
		events, err := e.w.Load(ctx, inv.run)
		if err != nil {
			return false, fmt.Errorf("load %s: %w", inv.run, err)
		}
		done := stageDone(events, s, res.Pos)
		return done == 1 || done >= stage.Steps, nil
	}
	if e.f.PendingCount && res.Pending > 0 {
		// Steps are still pending: not the last, and no log load. Pending 0
		// makes this completer a candidate only: under parallel dispatch a
		// step can complete before its siblings' step_created landed, so
		// the candidate confirms against the log (once per stage, normally).
		return false, nil
	}
	if stageSteps(stage) == 1 {
		return true, nil // the only step of its stage: its completion ends the stage
	}
	// Load the log to see whether the stage is complete. Without a guard the
	// check reads the log up to this completion's position: in a log whose
	// positions are assigned at commit, exactly one completer (the one
	// committed last) sees the whole stage. Under an enforced guard it reads
	// the whole log, and the guard fences duplicate continuations.
	events, err := e.w.Load(ctx, inv.run)
	if err != nil {
		return false, fmt.Errorf("load %s: %w", inv.run, err)
	}
	if int64(len(events)) < res.Pos {
		// The log cannot be shorter than a position this completer
		// already holds: the read lost events. Deciding "not last" on it
		// would strand the run; fail transiently and let the redelivery
		// (whose claim finds the step complete) re-check the stage.
		return false, fmt.Errorf("load %s: %d events, but this completion is at position %d: %w",
			inv.run, len(events), res.Pos, world.ErrTransient)
	}
	upTo := res.Pos
	if e.w.Capabilities().Guard {
		upTo = 0
	}
	st := derive(events, inv.prog.Program, upTo)
	return st.current > s, nil
}

// body runs what a step does: nothing (plus the configured duration) for a
// plain step, the writer or reader for a stream stage.
func (e *Engine) body(ctx context.Context, inv *invocation, s, idx int) error {
	stage := inv.prog.Stages[s]
	if stage.Kind == StageStream {
		switch idx {
		case 0:
			return e.streamWriter(ctx, inv.run, s, stage.Stream)
		case 2:
			return e.streamTransform(ctx, inv.run, s)
		}
		return e.streamReader(ctx, inv.run, s, stage.Stream)
	}
	if d := e.bodyDuration(inv.prog.Body); d > 0 {
		return e.rt.Sleep(ctx, d)
	}
	return nil
}

func (e *Engine) bodyDuration(b Body) time.Duration {
	d := b.Fixed
	if b.Jitter > 0 {
		e.rngMu.Lock()
		d += time.Duration(e.rng.Int64N(int64(b.Jitter) + 1))
		e.rngMu.Unlock()
	}
	return d
}
