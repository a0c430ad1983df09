package target

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/durabench/durabench/clock"
	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// ClockProbes is how many clock round trips a session estimates the
// target's offset from.
const ClockProbes = 16

// maxPollErrors is how many timeline polls in a row may fail before the
// run is failed with the last error (a target that stopped answering is
// counted, never waited for forever).
const maxPollErrors = 3

// Session is one cell's runs on a target: it starts runs, follows each
// run's timeline with long polls, and feeds the events — converted to the
// driver's clock — to the driver's observer, as if the engine ran in the
// driver. It implements driver.Target.
type Session struct {
	c        *Client
	scenario string
	opts     map[string]string
	rt       world.Runtime
	clk      clock.Offset

	mu     sync.Mutex
	obs    engine.Observer
	fail   func(run string, at time.Duration, err error)
	ctx    context.Context
	cancel context.CancelFunc
	hooks  map[string]string // hook token -> run
	// anomalies are each run's anomalies, as its last timeline answer
	// listed them.
	anomalies map[string][]Anomaly
	wg        sync.WaitGroup
}

// NewSession estimates the target's clock offset against rt (the driver's
// clock) and returns a session that starts runs of scenario with opts.
func NewSession(ctx context.Context, c *Client, scenario string, opts map[string]string, rt world.Runtime) (*Session, error) {
	var samples []clock.Sample
	for range ClockProbes {
		send := rt.Now()
		remote, err := c.Clock(ctx)
		recv := rt.Now()
		if err != nil {
			return nil, fmt.Errorf("clock of %s: %w", c.URL(), err)
		}
		samples = append(samples, clock.Sample{Send: send, Recv: recv, Remote: remote})
	}
	clk, _ := clock.Estimate(samples)
	return &Session{c: c, scenario: scenario, opts: opts, rt: rt, clk: clk, hooks: map[string]string{}, anomalies: map[string][]Anomaly{}}, nil
}

// Anomalies returns the anomalies the target reported for each run that
// had any (docs/target-protocol.md), by run id.
func (s *Session) Anomalies() map[string][]Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Anomaly, len(s.anomalies))
	for run, a := range s.anomalies {
		out[run] = append([]Anomaly(nil), a...)
	}
	return out
}

// Clock is the target's estimated clock offset (error bound RTT/2).
func (s *Session) Clock() clock.Offset { return s.clk }

// Attach starts feeding timelines into obs; fail records a run that failed
// with an error (the target's message, or a target that stopped
// answering). detach stops following runs.
func (s *Session) Attach(ctx context.Context, obs engine.Observer, fail func(run string, at time.Duration, err error)) (func(), error) {
	s.mu.Lock()
	s.obs, s.fail = obs, fail
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.mu.Unlock()
	return func() {
		s.cancel()
		s.wg.Wait()
	}, nil
}

// StartRun starts run id on the target and follows its timeline. p is the
// program durabench would run for the cell's scenario; it numbers steps.
func (s *Session) StartRun(ctx context.Context, id string, p engine.Program) error {
	if _, err := s.c.Start(ctx, StartRequest{Run: id, Scenario: s.scenario, Options: s.opts}); err != nil {
		return fmt.Errorf("target %s: start %s: %w", s.c.URL(), id, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow(id, p)
	}()
	return nil
}

// ResumeHook resumes the hook token of the run that reported it waiting.
func (s *Session) ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error {
	s.mu.Lock()
	run, ok := s.hooks[token]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("target %s: resume hook %s: no run reported it waiting: %w", s.c.URL(), token, world.ErrNotFound)
	}
	return s.c.Resume(ctx, run, token, ResumeRequest{ResumeID: resumeID, Payload: payload})
}

type stepKey struct{ stage, index, attempt int }

// follow long-polls run's timeline until it is terminal or the session
// is detached.
func (s *Session) follow(run string, p engine.Program) {
	s.mu.Lock()
	ctx, obs, fail := s.ctx, s.obs, s.fail
	s.mu.Unlock()
	conv := func(at int64) time.Duration { return s.clk.ToDriver(time.Duration(at)) }
	starts := map[stepKey]int64{}
	var after int64
	errs := 0
	for ctx.Err() == nil {
		tl, err := s.c.Timeline(ctx, run, after, PollWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errs++; errs >= maxPollErrors || errors.Is(err, ErrProtocol) {
				fail(run, s.rt.Now(), fmt.Errorf("target %s: %w", s.c.URL(), err))
				return
			}
			continue
		}
		errs = 0
		if len(tl.Anomalies) > 0 {
			s.mu.Lock()
			s.anomalies[run] = tl.Anomalies
			s.mu.Unlock()
		}
		finished := false
		for _, ev := range tl.Events {
			if ev.Seq <= after {
				fail(run, s.rt.Now(), fmt.Errorf("%w: target %s: timeline of %s: event seq %d after %d", ErrProtocol, s.c.URL(), run, ev.Seq, after))
				return
			}
			after = ev.Seq
			switch ev.Kind {
			case EventStepStarted:
				starts[stepKey{ev.Stage, ev.Index, ev.Attempt}] = ev.At
			case EventStepCompleted:
				k := stepKey{ev.Stage, ev.Index, ev.Attempt}
				start, ok := starts[k]
				if !ok {
					start = ev.At // a target that reports no start: a zero-length body
				}
				delete(starts, k)
				obs.StepBody(run, engine.StepSpan{Stage: ev.Stage, Index: ev.Index, Seq: p.StepSeq(ev.Stage, ev.Index),
					Start: conv(start), End: conv(ev.At), Inline: ev.Inline, Attempt: max(ev.Attempt, 1)})
			case EventHookWaiting:
				s.mu.Lock()
				s.hooks[ev.Token] = run
				s.mu.Unlock()
				obs.HookCreated(run, ev.Token, conv(ev.At))
			case EventChunkRead:
				obs.StreamChunk(run, engine.ChunkSpan{Stage: ev.Stage, Index: ev.Index, Written: conv(ev.Written), Read: conv(ev.At), Bytes: ev.Bytes})
			case EventRunCompleted:
				obs.RunFinished(run, conv(ev.At), false)
				finished = true
			case EventRunFailed:
				msg := ev.Error
				if msg == "" {
					msg = tl.Error
				}
				if msg == "" {
					msg = "the target reports the run failed"
				}
				fail(run, conv(ev.At), fmt.Errorf("target %s: %s", s.c.URL(), msg))
				finished = true
			}
		}
		if finished {
			return
		}
		if tl.Terminal() {
			// Terminal without its run event: end it now, on our clock.
			if tl.Status == StatusFailed {
				fail(run, s.rt.Now(), fmt.Errorf("target %s: %s", s.c.URL(), tl.Error))
			} else {
				obs.RunFinished(run, s.rt.Now(), false)
			}
			return
		}
	}
}
