package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/clockoffset"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
)

// ClockProbes is how many clock round trips a session estimates the
// target's offset from.
const ClockProbes = 16

// maxPollErrors is how many timeline polls in a row may fail before the
// run is failed with the last error (a target that stopped answering is
// counted, never waited for forever).
const maxPollErrors = 3

// ClockEvery is how often a session re-samples the target's clock while
// its cell runs (besides at its start and end).
const ClockEvery = 5 * time.Second

// Back-off after a poll that came back empty well before its wait ended
// (a target without long polls): the next poll of that run waits
// minBackoff, doubling up to maxBackoff.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Session is one cell's runs on a target: it starts runs, follows each
// run's timeline with long polls, and feeds the events — converted to the
// driver's clock — to the driver's observer, as if the engine ran in the
// driver. It implements driver.Target. It watches the target's clock from
// the cell's start to its end (ClockWatch) and counts polls answered
// empty early (Polls).
type Session struct {
	// Spans asks the target for its runs' span events (protocol 1.2:
	// "spans": true in each start), for their critical path: set it before
	// the first StartRun when the cell reports TTLS. A target may send
	// spans unasked; the session takes them either way.
	Spans bool

	c        *Client
	scenario string
	opts     map[string]string
	rt       world.Runtime
	clk      clockoffset.Offset

	mu   sync.Mutex
	obs  engine.Observer
	fail func(run string, at time.Duration, err error)
	// sink takes the runs' span events (protocol 1.2), converted: the
	// observer's, when it keeps spans (metrics.SpanSink), else nil (the
	// spans are read and left out).
	sink   metrics.SpanSink
	ctx    context.Context
	cancel context.CancelFunc
	hooks  map[string]hookRef // the driver's hook token -> the run's own
	// anomalies are each run's anomalies, as its last timeline answer
	// listed them.
	anomalies map[string][]protocol.Anomaly
	wg        sync.WaitGroup
	watch     ClockWatch
	polls     PollStats

	// batch: the target serves batch polls (Info.Batch), and the session
	// follows its runs (runs, by id) with them, as session name.
	batch bool
	name  string
	runs  map[string]*follower

	// batchStarts: the target serves batch starts (batch 2), and the
	// session's starts wait in queue for one of at most maxStartSenders
	// senders (smu guards both).
	batchStarts bool
	smu         sync.Mutex
	queue       []pendingStart
	senders     int
	// sent holds when each batched start went out (the driver's clock)
	// until the driver takes it (StartSent).
	sent map[string]time.Duration

	// streams: the target serves session streams (batch 3): the session
	// writes its starts on its stream (st, smu guards it; nil until opened
	// or after it broke) and reads its runs' news from it.
	streams bool
	st      *Stream
	// startAt: the target holds a start until its at (protocol 1.3), and
	// the session's starts go on its stream (StartRunAt).
	startAt bool
	// amu: one stream line or late end applied to a run at a time.
	amu sync.Mutex
}

// pendingStart is a start waiting for its batch; done has its outcome.
type pendingStart struct {
	req  protocol.StartRequest
	done chan startOutcome
}

// startOutcome is a batched start's answer and when its batch was sent.
type startOutcome struct {
	err  error
	sent time.Duration
}

// maxStartSenders is how many batch starts a session has in flight at
// most: a start finds a sender idle (and is sent alone, at once) unless
// that many are busy, and then goes with the next batch.
const maxStartSenders = 4

// startBatched starts req within a batch start (POST /v1/starts): the
// starts queued while every sender is busy go together, each answered
// as its own start request would be.
func (s *Session) startBatched(ctx context.Context, req protocol.StartRequest) error {
	ps := pendingStart{req, make(chan startOutcome, 1)}
	s.smu.Lock()
	s.queue = append(s.queue, ps)
	if s.senders < maxStartSenders {
		s.senders++
		go s.sendStarts()
	}
	s.smu.Unlock()
	select {
	case o := <-ps.done:
		if o.err == nil {
			s.smu.Lock()
			s.sent[req.Run] = o.sent
			s.smu.Unlock()
		}
		return o.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendStarts sends the queued starts, a batch at a time, until the queue
// is empty.
func (s *Session) sendStarts() {
	for {
		s.smu.Lock()
		if len(s.queue) == 0 {
			s.senders--
			s.smu.Unlock()
			return
		}
		batch := s.queue
		s.queue = nil
		s.smu.Unlock()
		reqs := make([]protocol.StartRequest, len(batch))
		for i, p := range batch {
			reqs[i] = p.req
		}
		sent := s.rt.Now()
		rep, err := s.c.Starts(context.Background(), reqs)
		for i, p := range batch {
			switch {
			case err != nil:
				p.done <- startOutcome{err: err}
			case rep.Started[i].Code/100 != 2:
				p.done <- startOutcome{err: &StatusError{Code: rep.Started[i].Code,
					Msg: fmt.Sprintf("POST /v1/starts: %s: %d: %s", p.req.Run, rep.Started[i].Code, rep.Started[i].Error)}}
			default:
				p.done <- startOutcome{sent: sent}
			}
		}
	}
}

// sessions numbers the sessions of this process (their names).
var sessions atomic.Int64

// ClockWatch is what a session saw of the target's clock during its cell.
type ClockWatch struct {
	// Start is the offset estimated at the cell's start: every timestamp
	// is converted with it, wrong by at most Start.RTT/2 while the clock
	// holds.
	Start clockoffset.Offset
	// Drift is the largest change of the offset from Start among the
	// later estimates (every ClockEvery and at the cell's end), signed: a
	// target clock that stepped or ran at another rate. Each timestamp's
	// conversion is wrong by up to |Drift| more than Start's bound.
	Drift time.Duration
	// Bound is the largest error bound (RTT/2) among the estimates.
	Bound time.Duration
	// Rounds is how many estimates were made (each of ClockProbes round
	// trips); Failed how many could not be made (the target did not
	// answer its clock).
	Rounds, Failed int
}

// PollStats counts a session's timeline polls.
type PollStats struct {
	Polls int64
	// EarlyEmpty is the polls answered with no event, the run still
	// running, before half their wait: a target that does not hold long
	// polls (each one the session then backs off after).
	EarlyEmpty int64
	// DroppedSpans is the span events left out because durabench cannot
	// place them (a category it does not know, an end before the start):
	// their time is unattributed on the path. FirstDropped says why the
	// first one was.
	DroppedSpans int64
	FirstDropped string
}

// EstimateClock samples c's clock ClockProbes times against now.
func EstimateClock(ctx context.Context, c *Client, now func() time.Duration) (clockoffset.Offset, error) {
	var samples []clockoffset.Sample
	for range ClockProbes {
		send := now()
		remote, err := c.Clock(ctx)
		recv := now()
		if err != nil {
			return clockoffset.Offset{}, fmt.Errorf("clock of %s: %w", c.URL(), err)
		}
		samples = append(samples, clockoffset.Sample{Send: send, Recv: recv, Remote: remote})
	}
	clk, _ := clockoffset.Estimate(samples)
	return clk, nil
}

// NewSession estimates the target's clock offset against rt (the driver's
// clock) and returns a session that starts runs of scenario with opts.
func NewSession(ctx context.Context, c *Client, scenario string, opts map[string]string, rt world.Runtime) (*Session, error) {
	// A target whose info does not answer is followed with per-run polls:
	// its runs' starts then fail with what is wrong (each one counted).
	info, infoErr := c.Info(ctx)
	clk, err := EstimateClock(ctx, c, rt.Now)
	if err != nil {
		return nil, err
	}
	batch, minor := 0, 0
	if infoErr == nil {
		batch, minor = c.batchOf(info.Batch), info.Minor
	}
	return &Session{c: c, scenario: scenario, opts: opts, rt: rt, clk: clk, hooks: map[string]hookRef{}, anomalies: map[string][]protocol.Anomaly{},
		watch: ClockWatch{Start: clk, Bound: clk.RTT / 2, Rounds: 1},
		batch: batch >= protocol.BatchPolls, runs: map[string]*follower{}, sent: map[string]time.Duration{},
		batchStarts: batch >= protocol.BatchStarts, streams: batch >= protocol.BatchStreams,
		startAt: batch >= protocol.BatchStreams && minor >= protocol.MinorStartAt,
		// Unique among the sessions of every driver the target serves:
		// this process's id, its clock and a count.
		name: fmt.Sprintf("%d-%x-%d", os.Getpid(), time.Now().UnixNano(), sessions.Add(1))}, nil
}

// Anomalies returns the anomalies the target reported for each run that
// had any (docs/target-protocol.md), by run id.
func (s *Session) Anomalies() map[string][]protocol.Anomaly {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]protocol.Anomaly, len(s.anomalies))
	for run, a := range s.anomalies {
		out[run] = append([]protocol.Anomaly(nil), a...)
	}
	return out
}

// Clock is the target's estimated clock offset (error bound RTT/2).
func (s *Session) Clock() clockoffset.Offset { return s.clk }

// ClockWatch is what the session saw of the target's clock so far (the
// whole cell once detached).
func (s *Session) ClockWatch() ClockWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watch
}

// Batched reports whether the session follows its runs with batch polls
// or a stream (the target declares batch 1 or more; Client.PerRun unset).
func (s *Session) Batched() bool { return s.batch }

// SendsOnly reports whether StartRun only sends a run's start (on the
// session's stream) and returns: the driver's pacer then starts each run
// itself, on its schedule.
func (s *Session) SendsOnly() bool { return s.streams }

// Polls counts the session's timeline polls so far (batch polls included,
// one per poll).
func (s *Session) Polls() PollStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// dropSpan counts a span event durabench cannot place (SpanOf).
func (s *Session) dropSpan(ev protocol.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls.DroppedSpans++
	if s.polls.FirstDropped == "" {
		why := fmt.Sprintf("ends at %d, before its start %d", ev.End, ev.At)
		if err := SpanCategory(ev.Category); err != nil {
			why = err.Error()
		}
		s.polls.FirstDropped = fmt.Sprintf("span %q of seq %d: %s", ev.Name, ev.Seq, why)
	}
}

// resample estimates the clock again and records its drift from the
// cell's start.
func (s *Session) resample(ctx context.Context) {
	clk, err := EstimateClock(ctx, s.c, s.rt.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.watch.Failed++
		return
	}
	s.watch.Rounds++
	s.watch.Bound = max(s.watch.Bound, clk.RTT/2)
	if d := clk.Offset - s.clk.Offset; d.Abs() > s.watch.Drift.Abs() {
		s.watch.Drift = d
	}
}

// Attach starts feeding timelines into obs; fail records a run that failed
// with an error (the target's message, or a target that stopped
// answering). detach stops following runs and samples the target's clock
// a last time.
func (s *Session) Attach(ctx context.Context, obs engine.Observer, fail func(run string, at time.Duration, err error)) (func(), error) {
	s.mu.Lock()
	s.obs, s.fail = obs, fail
	s.sink, _ = obs.(metrics.SpanSink)
	s.ctx, s.cancel = context.WithCancel(ctx)
	wctx := s.ctx
	s.mu.Unlock()
	switch {
	case s.streams:
		// Opened now so the first start does not wait for it; a stream
		// that does not open is opened again by the next start (each
		// start that cannot be sent fails, counted).
		s.smu.Lock()
		_, _ = s.streamLocked(wctx)
		s.smu.Unlock()
	case s.batch:
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pollBatch(wctx)
		}()
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(ClockEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				s.resample(wctx)
			}
		}
	}()
	return func() {
		s.cancel()
		s.smu.Lock()
		if s.st != nil {
			_ = s.st.Close()
			s.st = nil
		}
		s.smu.Unlock()
		s.wg.Wait()
		<-watched
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTimeout)
		defer cancel()
		s.resample(ectx)
	}, nil
}

// StartSent reports when run id's start left the driver (the driver's
// clock), once, after StartRun returned: a batched start waits in queue
// until one of the session's senders is free, and the run's lag counts
// from when it was sent. false: the start was sent when StartRun was
// called (no batch starts), or is unknown.
func (s *Session) StartSent(id string) (time.Duration, bool) {
	s.smu.Lock()
	defer s.smu.Unlock()
	at, ok := s.sent[id]
	delete(s.sent, id)
	return at, ok
}

// StartRun starts run id on the target and follows its timeline. p is the
// program durabench would run for the cell's scenario; it numbers steps.
func (s *Session) StartRun(ctx context.Context, id string, p engine.Program) error {
	if s.streams {
		return s.startStreamed(ctx, id, p)
	}
	if s.batch {
		// The run is followed before its start is sent: the session's
		// poll may answer for it before the start is.
		f := s.newFollower(id, p)
		s.mu.Lock()
		s.runs[id] = f
		s.mu.Unlock()
		req := protocol.StartRequest{Run: id, Scenario: s.scenario, Options: s.opts, Session: s.name, Spans: s.Spans}
		var err error
		if s.batchStarts {
			err = s.startBatched(ctx, req)
		} else {
			_, err = s.c.Start(ctx, req)
		}
		if err != nil {
			s.mu.Lock()
			delete(s.runs, id)
			s.mu.Unlock()
			return fmt.Errorf("target %s: start %s: %w", s.c.URL(), id, err)
		}
		s.mu.Lock()
		f.confirmed = true
		s.mu.Unlock()
		return nil
	}
	if _, err := s.c.Start(ctx, protocol.StartRequest{Run: id, Scenario: s.scenario, Options: s.opts, Spans: s.Spans}); err != nil {
		return fmt.Errorf("target %s: start %s: %w", s.c.URL(), id, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow(id, p)
	}()
	return nil
}

// streamLocked is the session's stream, opened (and its reader started)
// if it has none; smu held.
func (s *Session) streamLocked(ctx context.Context) (*Stream, error) {
	if s.st != nil {
		return s.st, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	st, err := s.c.OpenStream(ctx, s.name)
	if err != nil {
		return nil, err
	}
	s.st = st
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.readStream(st)
	}()
	return st, nil
}

// StartsAt reports whether StartRunAt sends a run's start ahead of its
// schedule for the target to hold until then (a 1.3 target, followed on a
// session stream).
func (s *Session) StartsAt() bool { return s.startAt }

// StartAhead is how long before a run's schedule StartRunAt is to be
// called when the target holds starts (StartsAt): the start's way to the
// target (half the session's round trip) and a margin for the target's
// reader waking on an idle core (61-154 µs measured on a 2-core VM, p50
// to p90; startWakeMargin covers its tail). The target spins what is left
// of it when the start arrives.
func (s *Session) StartAhead() time.Duration { return s.clk.RTT/2 + startWakeMargin }

// startWakeMargin is StartAhead's margin over half the round trip.
const startWakeMargin = 250 * time.Microsecond

// StartRunAt is StartRun for a run scheduled at at on the driver's clock,
// its start sent ahead of it: a target that holds starts (StartsAt) starts
// the run at at on its own clock (converted with the session's offset),
// so neither the start's way over the wire nor the offset's error is in
// the run's times (its events come back converted with the same offset).
// For any other target it is StartRun.
func (s *Session) StartRunAt(ctx context.Context, id string, p engine.Program, at time.Duration) error {
	if !s.startAt {
		return s.StartRun(ctx, id, p)
	}
	return s.startStreamedAt(ctx, id, p, int64(at+s.clk.Offset))
}

// startStreamed writes run id's start on the session's stream. It returns
// once the start is sent: a start the target refuses, as the runs it
// starts, is answered on the stream (the run then fails with the
// target's message).
func (s *Session) startStreamed(ctx context.Context, id string, p engine.Program) error {
	return s.startStreamedAt(ctx, id, p, 0)
}

// startStreamedAt is startStreamed, the start held until at on the
// target's clock when at is not 0.
func (s *Session) startStreamedAt(ctx context.Context, id string, p engine.Program, at int64) error {
	f := s.newFollower(id, p)
	s.smu.Lock()
	st, err := s.streamLocked(ctx)
	s.smu.Unlock()
	if err == nil {
		f.st = st
		s.mu.Lock()
		s.runs[id] = f
		s.mu.Unlock()
		var sent time.Duration
		if sent, err = st.Start(protocol.StartRequest{Run: id, Scenario: s.scenario, Options: s.opts, Spans: s.Spans, At: at}, s.rt.Now); err == nil {
			s.smu.Lock()
			s.sent[id] = sent
			s.smu.Unlock()
			return nil
		}
		s.mu.Lock()
		delete(s.runs, id)
		s.mu.Unlock()
	}
	return fmt.Errorf("target %s: start %s: %w", s.c.URL(), id, err)
}

// endLate ends f, a stream's run whose status said it is over (tl)
// lateWait ago without its terminal event since, on the driver's clock.
func (s *Session) endLate(f *follower, tl protocol.Timeline) {
	s.amu.Lock()
	defer s.amu.Unlock()
	s.mu.Lock()
	ours := s.runs[f.run] == f && s.ctx.Err() == nil
	if ours {
		delete(s.runs, f.run)
	}
	s.mu.Unlock()
	if ours {
		f.endOnDriverClock(tl)
		f.forget()
	}
}

// readStream feeds st's lines to the session's runs until it ends. A
// stream that breaks before the session is detached fails every run
// started on it with why (the next start opens another).
func (s *Session) readStream(st *Stream) {
	s.mu.Lock()
	ctx, fail := s.ctx, s.fail
	s.mu.Unlock()
	var err error
	for {
		var m protocol.StreamMessage
		if m, err = st.Next(); err != nil {
			break
		}
		if r := m.Started; r != nil {
			if r.Code/100 == 2 {
				continue
			}
			s.mu.Lock()
			f := s.runs[r.Run]
			delete(s.runs, r.Run)
			s.mu.Unlock()
			if f != nil {
				fail(r.Run, s.rt.Now(), fmt.Errorf("target %s: start %s: %w", s.c.URL(), r.Run,
					&StatusError{Code: r.Code, Msg: fmt.Sprintf("session stream: %s: %d: %s", r.Run, r.Code, r.Error)}))
				f.forget()
			}
			continue
		}
		tl := *m.Timeline
		s.mu.Lock()
		f := s.runs[tl.Run]
		s.mu.Unlock()
		if f == nil {
			continue // a run this session no longer follows
		}
		s.amu.Lock()
		switch f.apply(tl) {
		case more:
		case late:
			// The status is over, the terminal event not written yet.
			if f.lateEnd == nil {
				status := protocol.Timeline{Run: tl.Run, Status: tl.Status, Error: tl.Error} // not its events: reused
				f.lateEnd = time.AfterFunc(lateWait, func() { s.endLate(f, status) })
			}
		default:
			if f.lateEnd != nil {
				f.lateEnd.Stop()
			}
			f.forget()
			s.mu.Lock()
			delete(s.runs, tl.Run)
			s.mu.Unlock()
		}
		s.amu.Unlock()
	}
	if ctx.Err() != nil {
		return // detached: the stream was closed
	}
	if err == io.EOF {
		err = errors.New("the target ended the session stream")
	}
	s.smu.Lock()
	if s.st == st {
		s.st = nil
	}
	s.smu.Unlock()
	_ = st.Close()
	s.mu.Lock()
	var lost []*follower
	for run, f := range s.runs {
		if f.st == st {
			lost = append(lost, f)
			delete(s.runs, run)
		}
	}
	s.mu.Unlock()
	for _, f := range lost {
		fail(f.run, s.rt.Now(), fmt.Errorf("target %s: %w", s.c.URL(), err))
		f.forget()
	}
}

// hookRef is a hook as the target names it: its run and its token.
type hookRef struct{ run, token string }

// driverToken is the token a session gives the driver for a run's hook:
// the run id, "/", the target's token. A target's tokens need only be
// unique within their run, and the driver's resume id for it
// (driver.ResumeID) is then "drv/<run>/<token>".
func driverToken(run, token string) string { return run + "/" + token }

// ResumeHook resumes the hook the driver knows as token (driverToken) on
// the run that reported it waiting.
func (s *Session) ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error {
	s.mu.Lock()
	h, ok := s.hooks[token]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("target %s: resume hook %s: no run reported it waiting: %w", s.c.URL(), token, world.ErrNotFound)
	}
	return s.c.Resume(ctx, h.run, h.token, protocol.ResumeRequest{ResumeID: resumeID, Payload: payload})
}

type stepKey struct{ stage, index, attempt int }

// stepStarts are a run's steps started and not completed, by step: a
// short list (a run has a few steps in flight, and a map cost a single-
// step run 340 bytes), a map once it has more.
type stepStarts struct {
	few  []stepStart
	many map[stepKey]int64
}

type stepStart struct {
	k  stepKey
	at int64
}

// maxFewStarts is how many steps in flight stepStarts lists before it
// maps them.
const maxFewStarts = 16

func (s *stepStarts) put(k stepKey, at int64) {
	if s.many != nil {
		s.many[k] = at
		return
	}
	for i := range s.few {
		if s.few[i].k == k {
			s.few[i].at = at
			return
		}
	}
	if len(s.few) < maxFewStarts {
		s.few = append(s.few, stepStart{k, at})
		return
	}
	s.many = make(map[stepKey]int64, 2*maxFewStarts)
	for _, st := range s.few {
		s.many[st.k] = st.at
	}
	s.many[k], s.few = at, nil
}

// take returns and forgets k's start.
func (s *stepStarts) take(k stepKey) (int64, bool) {
	if s.many != nil {
		at, ok := s.many[k]
		delete(s.many, k)
		return at, ok
	}
	for i, st := range s.few {
		if st.k == k {
			s.few[i] = s.few[len(s.few)-1]
			s.few = s.few[:len(s.few)-1]
			return st.at, true
		}
	}
	return 0, false
}

// follower is what a session knows of one run it follows: the events read
// so far, the steps started, the hooks the run reported.
type follower struct {
	s     *Session
	run   string
	p     engine.Program
	after int64
	// starts are the step_started times of steps not completed yet.
	starts stepStarts
	// lateTerminal counts the answers after one that said the run is over
	// without its terminal event (a target whose status runs ahead of its
	// timeline): the event is waited for a little before the run is ended
	// on the driver's clock.
	lateTerminal int
	lateSince    time.Time // the first such answer
	hooks        []string  // the run's hooks, forgotten when it is
	// confirmed is set once the target accepted the run's start (batch
	// polls list its cursor from then on).
	confirmed bool
	// st is the stream the run was started on (nil: it is polled). A
	// stream's lines are not asked again: for a terminal status without
	// its terminal event the stream's reader waits (lateEnd).
	st *Stream
	// lateEnd ends a stream's run whose status is over lateWait after it
	// said so, if its terminal event has not come (nil until then).
	lateEnd *time.Timer
	// spans are the span events of the answer being applied, converted,
	// until they are passed on (before the run's end, and at the
	// answer's end); reused from answer to answer.
	spans []metrics.Span
}

// flushSpans passes the spans read so far on to the session's sink.
func (f *follower) flushSpans() {
	if len(f.spans) > 0 {
		f.s.sink.AddSpans(f.run, f.spans)
		f.spans = f.spans[:0]
	}
}

func (s *Session) newFollower(run string, p engine.Program) *follower {
	return &follower{s: s, run: run, p: p}
}

// outcome is what an answer did to a run.
type outcome int

const (
	more outcome = iota // the run goes on
	over                // the run is over (finished, failed, or failed by a protocol error)
	late                // the status is terminal, the terminal event not in the timeline yet
)

// apply feeds one timeline answer of the run to the driver's observer.
func (f *follower) apply(tl protocol.Timeline) outcome {
	s := f.s
	obs, fail, sink := s.obs, s.fail, s.sink
	conv := func(at int64) time.Duration { return s.clk.ToDriver(time.Duration(at)) }
	// The spans read are passed on before the run ends (the driver may
	// take its timeline as soon as it does) and at the answer's end.
	defer f.flushSpans()
	if len(tl.Anomalies) > 0 {
		s.mu.Lock()
		s.anomalies[f.run] = tl.Anomalies
		s.mu.Unlock()
	}
	for _, ev := range tl.Events {
		if ev.Seq <= f.after {
			fail(f.run, s.rt.Now(), fmt.Errorf("%w: target %s: timeline of %s: event seq %d after %d", protocol.ErrProtocol, s.c.URL(), f.run, ev.Seq, f.after))
			return over
		}
		f.after = ev.Seq
		switch ev.Kind {
		case protocol.EventStepStarted:
			f.starts.put(stepKey{ev.Stage, ev.Index, ev.Attempt}, ev.At)
		case protocol.EventStepCompleted:
			k := stepKey{ev.Stage, ev.Index, ev.Attempt}
			start, ok := f.starts.take(k)
			if !ok {
				start = ev.At // a target that reports no start: a zero-length body
			}
			obs.StepBody(f.run, engine.StepSpan{Stage: ev.Stage, Index: ev.Index, Seq: f.p.StepSeq(ev.Stage, ev.Index),
				Start: conv(start), End: conv(ev.At), Inline: ev.Inline, Attempt: max(ev.Attempt, 1)})
		case protocol.EventHookWaiting:
			dt := driverToken(f.run, ev.Token)
			s.mu.Lock()
			s.hooks[dt] = hookRef{f.run, ev.Token}
			s.mu.Unlock()
			f.hooks = append(f.hooks, dt)
			obs.HookCreated(f.run, dt, conv(ev.At))
		case protocol.EventChunkRead:
			obs.StreamChunk(f.run, engine.ChunkSpan{Stage: ev.Stage, Index: ev.Index, Written: conv(ev.Written), Read: conv(ev.At), Bytes: ev.Bytes})
		case protocol.EventSpan:
			// Accepted from a target of any minor version (the checker
			// tells one below 1.2 to declare it); one durabench cannot
			// place is left out.
			if sink == nil {
				continue
			}
			if sp, ok := SpanOf(ev, conv); ok {
				f.spans = append(f.spans, sp)
			} else {
				s.dropSpan(ev)
			}
		case protocol.EventRunCompleted:
			f.flushSpans()
			obs.RunFinished(f.run, conv(ev.At), false)
			return over
		case protocol.EventRunFailed:
			f.flushSpans()
			msg := ev.Error
			if msg == "" {
				msg = tl.Error
			}
			if msg == "" {
				msg = "the target reports the run failed"
			}
			fail(f.run, conv(ev.At), fmt.Errorf("target %s: %s", s.c.URL(), msg))
			return over
		}
	}
	if !tl.Terminal() {
		return more
	}
	if f.st != nil {
		// A stream writes the event when it comes: its reader waits
		// lateWait for it (endLate).
		return late
	}
	// Four answers and 0.3 s (a batch poll may answer again at once).
	if f.lateTerminal == 0 {
		f.lateSince = time.Now()
	}
	if f.lateTerminal < maxLateTerminal || time.Since(f.lateSince) < lateWait {
		f.lateTerminal++
		return late
	}
	f.endOnDriverClock(tl)
	return over
}

// endOnDriverClock ends the run whose status tl says is over but whose
// terminal event never came: on the driver's clock.
func (f *follower) endOnDriverClock(tl protocol.Timeline) {
	s := f.s
	f.flushSpans()
	if tl.Status == protocol.StatusFailed {
		s.fail(f.run, s.rt.Now(), fmt.Errorf("target %s: %s", s.c.URL(), tl.Error))
	} else {
		s.obs.RunFinished(f.run, s.rt.Now(), false)
	}
}

// forget drops the run's hooks: it is over.
func (f *follower) forget() {
	f.s.mu.Lock()
	for _, h := range f.hooks {
		delete(f.s.hooks, h)
	}
	f.s.mu.Unlock()
}

// follow long-polls run's timeline until it is terminal or the session
// is detached, then releases it (DELETE: the target may forget it).
func (s *Session) follow(run string, p engine.Program) {
	s.mu.Lock()
	ctx, fail := s.ctx, s.fail
	s.mu.Unlock()
	f := s.newFollower(run, p)
	defer f.forget()
	errs := 0
	var backoff time.Duration
	wait := PollWait
	for ctx.Err() == nil {
		asked := time.Now()
		tl, err := s.c.Timeline(ctx, run, f.after, wait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errs++; errs >= maxPollErrors || errors.Is(err, protocol.ErrProtocol) {
				fail(run, s.rt.Now(), fmt.Errorf("target %s: %w", s.c.URL(), err))
				return
			}
			continue
		}
		errs = 0
		early := len(tl.Events) == 0 && !tl.Terminal() && wait > 0 && time.Since(asked) < wait/2
		s.mu.Lock()
		s.polls.Polls++
		if early {
			s.polls.EarlyEmpty++
		}
		s.mu.Unlock()
		if tl.Run != "" && tl.Run != run {
			fail(run, s.rt.Now(), fmt.Errorf("%w: target %s: timeline of %s answered for run %q", protocol.ErrProtocol, s.c.URL(), run, tl.Run))
			return
		}
		switch f.apply(tl) {
		case over:
			s.release(ctx, run)
			return
		case late:
			// The status is over but the terminal event is not in the
			// timeline yet: ask again (without a wait, after a pause)
			// before ending the run on the driver's clock.
			wait = 0
			if sleep(ctx, minBackoff<<min(f.lateTerminal, maxLateTerminal)) != nil {
				return
			}
			continue
		}
		if !early {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		if sleep(ctx, backoff) != nil {
			return
		}
	}
}

// pollBatch follows every run of the session with one batch long poll at
// a time (a target that declares batch 1), until the session is detached.
// Each poll releases the runs the last one ended.
func (s *Session) pollBatch(ctx context.Context) {
	errs := 0
	var backoff time.Duration
	var release []string
	for ctx.Err() == nil {
		req := protocol.BatchRequest{Session: s.name, Release: release}
		s.mu.Lock()
		for run, f := range s.runs {
			// A run not confirmed yet may be unknown to the target (its
			// start on the way): listed once its first events were read.
			if f.confirmed || f.after > 0 {
				req.Runs = append(req.Runs, protocol.Cursor{Run: run, After: f.after})
			}
		}
		fail := s.fail
		s.mu.Unlock()
		asked := time.Now()
		reply, err := s.c.Batch(ctx, req, PollWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errs++; errs >= maxPollErrors || errors.Is(err, protocol.ErrProtocol) {
				// Every run in flight fails with the error; later runs
				// are polled for afresh.
				errs = 0
				s.mu.Lock()
				runs := s.runs
				s.runs = map[string]*follower{}
				s.mu.Unlock()
				for run, f := range runs {
					fail(run, s.rt.Now(), fmt.Errorf("target %s: %w", s.c.URL(), err))
					f.forget()
				}
			}
			continue
		}
		errs, release = 0, nil
		early := len(reply.Timelines) == 0 && len(reply.Missing) == 0 && time.Since(asked) < PollWait/2
		s.mu.Lock()
		s.polls.Polls++
		if early {
			s.polls.EarlyEmpty++
		}
		s.mu.Unlock()
		lateOnly := len(reply.Timelines) > 0
		for _, tl := range reply.Timelines {
			s.mu.Lock()
			f := s.runs[tl.Run]
			s.mu.Unlock()
			if f == nil {
				continue // a run this session no longer follows
			}
			switch f.apply(tl) {
			case more:
				lateOnly = false
				continue
			case late:
				continue
			}
			lateOnly = false
			f.forget()
			s.mu.Lock()
			delete(s.runs, tl.Run)
			s.mu.Unlock()
			release = append(release, tl.Run)
		}
		for _, run := range reply.Missing {
			s.mu.Lock()
			f := s.runs[run]
			delete(s.runs, run)
			s.mu.Unlock()
			if f != nil {
				fail(run, s.rt.Now(), fmt.Errorf("target %s: batch timeline poll: no run %s", s.c.URL(), run))
				f.forget()
			}
		}
		switch {
		case lateOnly:
			// Only runs whose status is ahead of their terminal event:
			// pause before asking again.
			if sleep(ctx, 2*minBackoff) != nil {
				return
			}
		case early:
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if sleep(ctx, backoff) != nil {
				return
			}
		default:
			backoff = 0
		}
	}
}

// maxLateTerminal is how many times a session asks again for a terminal
// event the status already announced (pauses of 20, 40, 80 and 160 ms:
// 300 ms in all).
const maxLateTerminal = 4

// lateWait is how long a session waits in all for a terminal event the
// status already announced.
const lateWait = 300 * time.Millisecond

// release tells the target it may forget run's timeline. A 1.0 target
// answers 404 (it has no such endpoint): nothing is lost either way.
func (s *Session) release(ctx context.Context, run string) {
	_ = s.c.Release(ctx, run)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
