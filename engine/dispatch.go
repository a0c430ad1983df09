package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/durabench/durabench/world"
)

// dispatchStage is the suspension handler: it creates the current stage's
// missing steps, hands the queued ones to the queue according to the
// dispatch feature, and runs the inline ones in this task.
func (e *Engine) dispatchStage(ctx context.Context, inv *invocation, st *runState, guard world.Precondition, events []world.Event) error {
	stage := inv.prog.Stages[st.current]
	n := stageSteps(stage)
	if st.created > 0 {
		// The stage was dispatched before, by an activation that may have
		// failed or died between a step_created and its publish (or in an
		// inline step, which has no message): hand every created,
		// unfinished step to the queue again. What is republished depends
		// on the log, never on the delivery's attempt number: a fresh copy
		// of a failed activation arrives with attempt 1, and gating this on
		// attempt > 1 left those steps waiting for the original's
		// visibility timeout. Messages that exist are deduplicated by ID.
		if err := e.republish(ctx, inv, st.current, n, events); err != nil {
			return err
		}
	}
	if st.created >= n {
		return nil // every step exists: the run waits for them
	}
	missing := make([]int, 0, n-st.created)
	for i := 0; i < n; i++ {
		if st.createdSet == nil || !st.createdSet[i] {
			missing = append(missing, i)
		}
	}
	nInline := 0
	if stage.Kind == StageSteps && e.mayInline(inv) {
		nInline = min(e.f.InlineSteps, len(missing))
		if e.f.InlineBudget > 0 {
			nInline = min(nInline, e.f.InlineBudget-inv.inlined)
		}
	}
	inline, queued := missing[:nInline], missing[nInline:]
	// owned[i]: this invocation's create of inline[i] was not a duplicate, so
	// it (and nobody else) runs the step.
	owned := make([]bool, len(inline))
	s := st.current
	// Held before the create, so that an activation loading the log the
	// moment after it sees the step as running here (Engine.inline); the
	// steps another invocation owns are let go once created, the rest
	// when this dispatch returns.
	created := false
	for _, idx := range inline {
		e.inline.add(stepKey{inv.run, s, idx}, 1)
	}
	defer func() {
		for i, idx := range inline {
			if !created || owned[i] {
				e.inline.add(stepKey{inv.run, s, idx}, -1)
			}
		}
	}()

	if e.f.Dispatch == Parallel {
		// A create per step, and a publish per queued step (or one
		// goroutine publishing them all), each call in a slot of its own.
		e.spans.reserveCalls(ctx, len(inline)+2*len(queued))
		g := e.rt.NewGroup()
		for i, idx := range inline {
			g.Go(func() error {
				res, err := e.createStep(ctx, inv.run, inv.prog.step(s, idx), inv.prog.payload, world.Precondition{})
				owned[i] = err == nil && !res.Duplicate
				return err
			})
		}
		for _, idx := range queued {
			// step_created ∥ publish: a transient create failure is
			// swallowed (the message carries the step input, so the
			// consumer re-ensures it); a publish failure fails the pass.
			g.Go(func() error {
				_, err := e.createStep(ctx, inv.run, inv.prog.step(s, idx), inv.prog.payload, world.Precondition{})
				if err != nil && !world.IsTransient(err) && !errors.Is(err, world.ErrConflict) {
					return err
				}
				if err != nil && world.IsTransient(err) {
					e.stats.createsSwallowed.Add(1)
				}
				return nil
			})
			if e.f.PublishLoop != Serial {
				g.Go(func() error { return e.publishStep(ctx, inv, s, idx, true) })
			}
		}
		if e.f.PublishLoop == Serial {
			// The messages go out one by one, beside the creates.
			g.Go(func() error { return e.publishAll(ctx, inv, s, queued, true) })
		}
		err := g.Wait()
		e.spans.releaseCalls(ctx)
		if err != nil {
			return err
		}
	} else {
		if err := e.createSequential(ctx, inv, s, missing, guard, owned); err != nil {
			return err
		}
		if err := e.publishAll(ctx, inv, s, queued, false); err != nil {
			return err
		}
	}

	created = true
	for i, idx := range inline {
		if !owned[i] {
			e.inline.add(stepKey{inv.run, s, idx}, -1)
		}
	}
	for i, idx := range inline {
		if !owned[i] {
			continue
		}
		inv.inlined++
		last, err := e.runInline(ctx, inv, s, idx)
		if err != nil {
			return err
		}
		if last {
			return errContinue
		}
	}
	return nil
}

// createSequential writes every missing step_created before anything is
// published. Under an enforced guard the writes are chained, each expecting
// the position of the one before; otherwise they run concurrently.
func (e *Engine) createSequential(ctx context.Context, inv *invocation, s int, missing []int,
	guard world.Precondition, owned []bool) error {
	// The inline steps are the first len(owned) missing ones.
	mark := func(pos int, res world.AppendResult) {
		if pos < len(owned) {
			owned[pos] = !res.Duplicate
		}
	}
	if e.w.Capabilities().Guard {
		for pos, idx := range missing {
			res, err := e.createStep(ctx, inv.run, inv.prog.step(s, idx), inv.prog.payload, guard)
			if err != nil {
				return err
			}
			mark(pos, res)
			guard.LastPos = res.Pos
		}
		return nil
	}
	g := e.rt.NewGroup()
	for pos, idx := range missing {
		g.Go(func() error {
			res, err := e.createStep(ctx, inv.run, inv.prog.step(s, idx), inv.prog.payload, world.Precondition{})
			if err != nil {
				return err
			}
			mark(pos, res)
			return nil
		})
	}
	return g.Wait()
}

// publishAll publishes the queued steps' messages: in a serial loop (the
// reference's per-step enqueue loop) or all at once.
func (e *Engine) publishAll(ctx context.Context, inv *invocation, s int, queued []int, withInput bool) error {
	if e.f.PublishLoop == Serial {
		for _, idx := range queued {
			if err := e.publishStep(ctx, inv, s, idx, withInput); err != nil {
				return err
			}
		}
		return nil
	}
	g := e.rt.NewGroup()
	for _, idx := range queued {
		g.Go(func() error { return e.publishStep(ctx, inv, s, idx, withInput) })
	}
	return g.Wait()
}

// createStep appends step_created for the step named n, with its input. It
// is idempotent through the event ID: a re-ensure of an existing step
// reports Duplicate.
//
// Like publishStep it runs in a goroutine of its own per step: its error
// is wrapped out of line, so that its frame stays small.
func (e *Engine) createStep(ctx context.Context, run string, n stepNames, input []byte, pre world.Precondition) (world.AppendResult, error) {
	ctx, c := e.spans.call(ctx) // as spanWorld.Append, in this frame
	res, err := e.base.Append(ctx, run, world.Event{Kind: world.StepCreated, ID: n.create, Entity: n.id, Data: input}, pre)
	c.done(0, opAppend[world.StepCreated], int(n.stage), int(n.index))
	if err != nil {
		return res, createStepError(run, n.id, err)
	}
	return res, nil
}

//go:noinline
func createStepError(run, id string, err error) error {
	return fmt.Errorf("step_created %s/%s: %w", run, id, err)
}

// publishStep enqueues the execution message of step (s, idx). It runs in
// a goroutine of its own per step (a fan-out's dispatch), which starts on
// a small stack: the message's ID and body are built and an error wrapped
// out of line, each in a small frame of its own, so that the world's call,
// with the span recorder's wrapper around it, does not grow the
// goroutine's stack (a copy of it for every step).
func (e *Engine) publishStep(ctx context.Context, inv *invocation, s, idx int, withInput bool) error {
	id := stepMessageIDOf(inv, s, idx)
	body := e.stepBody(inv, s, idx, withInput)
	ctx, c := e.spans.call(ctx) // as spanWorld.Publish, in this frame
	note := c.publishing(id, s, idx)
	_, err := e.base.Publish(ctx, world.Message{ID: id, Run: inv.run, Body: body}, world.PublishOptions{})
	c.published(note, id, err == nil)
	if err != nil {
		return publishStepError(inv, s, idx, err)
	}
	return nil
}

// stepMessageIDOf is the ID of step (s, idx)'s execution message.
//
//go:noinline
func stepMessageIDOf(inv *invocation, s, idx int) string {
	return stepMessageID(inv.run, inv.prog.step(s, idx).id)
}

// stepBody is the body of step (s, idx)'s execution message.
//
//go:noinline
func (e *Engine) stepBody(inv *invocation, s, idx int, withInput bool) []byte {
	m := message{kind: kindStep, run: inv.run, stage: s, index: idx, seq: inv.prog.seq(s, idx),
		stepInput: withInput, runContext: e.f.RunContext}
	return m.encode()
}

//go:noinline
func publishStepError(inv *invocation, s, idx int, err error) error {
	return fmt.Errorf("publish step %s/%s: %w", inv.run, inv.prog.step(s, idx).id, err)
}

// republish hands every created, unfinished step of stage s to the queue
// again. Any activation that finds the stage dispatched runs it: the one
// before it may have failed or died,
// maybe in an inline step (which has no message) or between a step_created
// and its publish. Steps whose messages exist are deduplicated by their
// message IDs; a step still running elsewhere may run twice (at least once,
// as every redelivery).
func (e *Engine) republish(ctx context.Context, inv *invocation, s, n int, events []world.Event) error {
	const created, done = 1, 2
	state := make([]uint8, n)
	for i := range events {
		ev := &events[i]
		var bit uint8
		switch {
		case ev.Kind == world.StepCreated:
			bit = created
		case ev.Kind.StepTerminal():
			bit = done
		default:
			continue
		}
		if stage, idx, ok := parseStepID(ev.Entity); ok && stage == s && idx < n {
			state[idx] |= bit
		}
	}
	e.spans.reserveCalls(ctx, n) // a publish per step at most, each in a slot
	g := e.rt.NewGroup()
	for idx := range n {
		if state[idx] != created {
			continue
		}
		if e.inline.held(stepKey{inv.run, s, idx}) {
			continue // running inline in this engine (see Engine.inline)
		}
		e.stats.republished.Add(1)
		g.Go(func() error { return e.publishStep(ctx, inv, s, idx, e.f.Dispatch == Parallel) })
	}
	err := g.Wait()
	e.spans.releaseCalls(ctx)
	return err
}
