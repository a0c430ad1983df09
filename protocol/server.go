package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/world"
)

// MaxWait bounds a timeline long poll.
const MaxWait = 30 * time.Second

// DefaultWait is a long poll's wait when the request gives none.
const DefaultWait time.Duration = 0

// Batch is how long a timeline poll that has new events waits for more
// before it answers (at once for a waiting hook or a finished run).
const Batch = 10 * time.Millisecond

// BatchPoll is how long a batch timeline poll that has news waits for
// more before it answers (at once for a waiting hook): the runs of a
// session finish one after another, and each answer should carry many.
const BatchPoll = 2 * time.Millisecond

// StreamBatch is how long a session stream holds news, from its last
// write or, after a quiet spell, from the news's coming, to write it with
// what follows (at once for a start answer, a waiting hook or a run's
// end: what the driver acts on). Each write wakes the driver's reader and
// both sides' network stacks on the cores the engine under test runs on;
// one write per event cost a 64-way fan-out 10-20% of its TTLS through
// the protocol, a write every 2 ms still 3-8% where every 10 ms costs
// 3-5% (make bench, ProtocolOverhead). The events' times are the
// engine's, so holding them moves no metric.
const StreamBatch = 10 * time.Millisecond

// Retain is how long a server keeps a finished run's timeline that
// durabench has not released (DELETE /v1/runs/{run}): the protocol's
// time-based fallback, never a count — a driver far behind its schedule
// still finds every timeline it has not read.
const Retain = 10 * time.Minute

// Sink receives a backend's engine-side events.
type Sink interface {
	// Event records ev (Seq is assigned by the sink) for run.
	Event(run string, ev Event)
	// Finished records that run is over.
	Finished(run string, failed bool, msg string)
}

// Backend is an engine served over the protocol.
type Backend interface {
	Info() Info
	// Now is the target clock every event is stamped with.
	Now() time.Duration
	// Open starts the engine; it reports its runs' events to sink.
	Open(ctx context.Context, sink Sink) error
	// Start starts a run once the engine accepted it. An error wrapping
	// ErrUnsupported is answered 422, one wrapping world.ErrConflict (the
	// engine has a run of that id) 409.
	Start(ctx context.Context, req StartRequest) error
	// Resume resumes run's hook token (idempotent per resume id).
	Resume(ctx context.Context, run, token string, req ResumeRequest) error
	Close(ctx context.Context) error
}

// ErrUnsupported is returned by Backend.Start for a scenario or option the
// engine cannot run (the server answers 422).
var ErrUnsupported = errors.New("unsupported")

// Server serves a Backend over the target protocol.
type Server struct {
	b    Backend
	info Info // b.Info(), read once

	// Retain overrides the package's Retain (tests).
	Retain time.Duration
	// StreamBatch overrides the package's StreamBatch (tests, benchmarks);
	// negative: every news is written at once.
	StreamBatch time.Duration

	mu       sync.Mutex
	runs     map[string]*runLog
	finished []*runLog // finished runs not released, oldest first (Retain)
	sessions map[string]*sessionLog
}

// sessionLog is a driver session's runs not released (batch polls).
type sessionLog struct {
	runs map[string]*runLog
	// changed is closed when an event or a status of one of runs changes.
	changed chan struct{}
	// stream is the session's stream, when one is open (batch 3): runs
	// with news are queued on it. ended holds, while it is open, the runs
	// it wrote to their end (and the server forgot): a start of one of
	// them is refused 409, as while the server held it.
	stream *streamLog
	ended  map[string]struct{}
}

// streamLog is what an open session stream has to write: start results,
// and the runs with news since its last line for them (each once).
type streamLog struct {
	wake    chan struct{} // 1 slot: something to write
	started []StartResult
	dirty   []*runLog
	// urgent: the news queued holds something the driver acts on (a start
	// answer, a waiting hook, a run's end): it is written at once.
	urgent bool
}

func (st *streamLog) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// queueLocked queues l's news on the stream (the server's mu held).
func (st *streamLog) queueLocked(l *runLog) {
	if !l.queued {
		l.queued = true
		st.dirty = append(st.dirty, l)
		st.signal()
	}
}

type runLog struct {
	run     string
	events  []Event
	status  string
	err     string
	changed chan struct{}
	sess    *sessionLog // nil: the run was started without a session
	// pushed is how many events a session stream wrote of the run, and
	// queued whether the run waits in its stream's dirty list.
	pushed int
	queued bool
	// done is when the run finished (the Retain fallback counts from it).
	done time.Time
}

// NewServer opens b and returns a server for it.
func NewServer(ctx context.Context, b Backend) (*Server, error) {
	s := &Server{b: b, runs: map[string]*runLog{}, sessions: map[string]*sessionLog{}}
	if err := b.Open(ctx, s); err != nil {
		return nil, err
	}
	// This server implements 1.2's endpoints and retention for any
	// backend (span events, 1.2, are the backend's to send, if it has
	// any: a 1.2 target may send none).
	s.info = b.Info()
	if s.info.Protocol == ProtocolVersion {
		s.info.Minor = ProtocolMinor
		s.info.Batch = BatchVersion
	}
	return s, nil
}

// Close closes the backend.
func (s *Server) Close(ctx context.Context) error { return s.b.Close(ctx) }

// newLogLocked records a run the server will follow.
func (s *Server) newLogLocked(run, session string) *runLog {
	l := &runLog{run: run, status: StatusRunning, changed: make(chan struct{})}
	s.runs[run] = l
	if session != "" {
		sl := s.sessions[session]
		if sl == nil {
			sl = &sessionLog{runs: map[string]*runLog{}, changed: make(chan struct{})}
			s.sessions[session] = sl
		}
		sl.runs[run] = l
		l.sess = sl
	}
	return l
}

// changedLocked wakes the polls waiting on l (its own and its session's).
func (l *runLog) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
	if l.sess != nil {
		close(l.sess.changed)
		l.sess.changed = make(chan struct{})
		if st := l.sess.stream; st != nil {
			st.queueLocked(l)
		}
	}
}

// urgentLocked marks l's stream's news urgent when ev is one the driver
// acts on (StreamBatch).
func (l *runLog) urgentLocked(ev Event) {
	if l.sess == nil || l.sess.stream == nil {
		return
	}
	if ev.Terminal() || ev.Kind == EventHookWaiting {
		l.sess.stream.urgent = true
		l.sess.stream.signal()
	}
}

// forgetLocked forgets run (released or expired), and reports whether the
// server knew it.
func (s *Server) forgetLocked(run string) bool {
	l := s.runs[run]
	if l == nil {
		return false
	}
	delete(s.runs, run)
	l.events = nil // its entry in s.finished goes with the next expiry
	if l.sess != nil {
		delete(l.sess.runs, run)
	}
	return true
}

// Event implements Sink. An event of a run the server does not know (one
// released, or never started through it) is dropped.
func (s *Server) Event(run string, ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.runs[run]
	if l == nil {
		return
	}
	ev.Seq = int64(len(l.events) + 1)
	l.events = append(l.events, ev)
	l.urgentLocked(ev)
	l.changedLocked()
}

// Events records several events of run at once, in order, as that many
// Event calls would (a backend with many at a time, such as a task's span
// events, wakes the run's polls once).
func (s *Server) Events(run string, evs []Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.runs[run]
	if l == nil {
		return
	}
	for _, ev := range evs {
		ev.Seq = int64(len(l.events) + 1)
		l.events = append(l.events, ev)
		l.urgentLocked(ev)
	}
	l.changedLocked()
}

// Finished implements Sink.
func (s *Server) Finished(run string, failed bool, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.runs[run]
	if l == nil || l.status != StatusRunning {
		return
	}
	l.status, l.err = StatusCompleted, ""
	if failed {
		l.status, l.err = StatusFailed, msg
	}
	if l.sess != nil && l.sess.stream != nil {
		l.sess.stream.urgent = true
		l.sess.stream.signal()
	}
	l.changedLocked()
	l.done = time.Now()
	s.finished = append(s.finished, l)
	s.expireLocked(l.done)
}

// expireLocked forgets the finished runs not released within Retain.
func (s *Server) expireLocked(now time.Time) {
	retain := s.Retain
	if retain <= 0 {
		retain = Retain
	}
	// The oldest first; released runs at the head go too (runs are
	// mostly released in the order they finish).
	n := 0
	for ; n < len(s.finished); n++ {
		l := s.finished[n]
		if s.runs[l.run] != l {
			continue // released
		}
		if now.Sub(l.done) <= retain {
			break
		}
		s.forgetLocked(l.run)
	}
	if n > 0 {
		s.finished = slices.Delete(s.finished, 0, n)
	}
}

// release forgets a run's timeline: durabench has read it. A run still
// running is forgotten too (its later events are dropped).
func (s *Server) release(w http.ResponseWriter, run string) {
	s.mu.Lock()
	known := s.forgetLocked(run)
	s.mu.Unlock()
	if !known {
		httpError(w, http.StatusNotFound, "no run "+run)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ServeHTTP implements the protocol's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Split the escaped path: run ids and hook tokens may hold a '/'
	// (escaped as %2F by the client).
	esc := r.URL.EscapedPath()
	path := strings.TrimPrefix(esc, "/v1/")
	if path == esc {
		httpError(w, http.StatusNotFound, "not a /v1/ endpoint")
		return
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			httpError(w, http.StatusBadRequest, "bad path "+esc)
			return
		}
		parts[i] = u
	}
	switch {
	case r.Method == http.MethodGet && path == "info":
		writeJSON(w, http.StatusOK, s.info)
	case r.Method == http.MethodGet && path == "clock":
		writeJSON(w, http.StatusOK, ClockReply{Now: ns(s.b.Now())})
	case r.Method == http.MethodPost && path == "runs":
		s.start(w, r)
	case r.Method == http.MethodPost && path == "starts":
		s.starts(w, r)
	case r.Method == http.MethodPost && path == "timelines":
		s.batch(w, r)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "sessions" && parts[2] == "stream" && parts[1] != "":
		s.stream(w, r, parts[1])
	case r.Method == http.MethodDelete && len(parts) == 2 && parts[0] == "runs":
		s.release(w, parts[1])
	case r.Method == http.MethodGet && len(parts) == 3 && parts[0] == "runs" && parts[2] == "timeline":
		s.timeline(w, r, parts[1])
	case r.Method == http.MethodPost && len(parts) == 4 && parts[0] == "runs" && parts[2] == "hooks":
		s.resume(w, r, parts[1], parts[3])
	default:
		httpError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	}
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Run == "" || req.Scenario == "" {
		httpError(w, http.StatusBadRequest, "a start request needs run and scenario")
		return
	}
	code, msg := s.startOne(r.Context(), req)
	if code != http.StatusAccepted {
		httpError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusAccepted, StartReply{Run: req.Run, Accepted: ns(s.b.Now())})
}

// startOne starts req: 202, or the status and message of why not.
func (s *Server) startOne(ctx context.Context, req StartRequest) (int, string) {
	// What the backend does not declare it cannot run: 422 for every
	// backend, whether its Start checks or not.
	if ok, why := s.info.Supports(req.Scenario, req.Options); !ok {
		return http.StatusUnprocessableEntity, why
	}
	if req.At != 0 {
		if ahead := time.Duration(req.At) - s.b.Now(); ahead > MaxStartAhead {
			return http.StatusBadRequest, fmt.Sprintf("start %s: at is %v ahead of the target's clock (at most %v)", req.Run, ahead, MaxStartAhead)
		}
	}
	s.mu.Lock()
	_, dup := s.runs[req.Run]
	if sl := s.sessions[req.Session]; sl != nil && !dup {
		_, dup = sl.ended[req.Run]
	}
	if !dup {
		s.newLogLocked(req.Run, req.Session)
	}
	s.mu.Unlock()
	if dup {
		return http.StatusConflict, "run " + req.Run + " exists"
	}
	if req.At != 0 && !s.holdUntil(ctx, time.Duration(req.At)) {
		s.mu.Lock()
		s.forgetLocked(req.Run)
		s.mu.Unlock()
		return http.StatusServiceUnavailable, "start " + req.Run + ": the request ended before its at"
	}
	if err := s.b.Start(ctx, req); err != nil {
		s.mu.Lock()
		s.forgetLocked(req.Run)
		s.mu.Unlock()
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrUnsupported):
			code = http.StatusUnprocessableEntity
		case errors.Is(err, world.ErrConflict):
			// The engine has the run: one a stream wrote to its end
			// (and the server forgot), or one started elsewhere.
			code = http.StatusConflict
		}
		return code, err.Error()
	}
	return http.StatusAccepted, ""
}

// holdSpin is how long before a start's at its hold stops sleeping and
// spins: the runtime's timers wake an idle processor up to a millisecond
// late, and a thread woken on an idle vCPU tens of µs late. durabench
// sends a start a few hundred µs ahead of its at, so a hold is mostly the
// spin — the spin the driver's pacer would otherwise do before sending
// it, moved to the target's side of the wire.
const holdSpin = 1500 * time.Microsecond

// holdUntil waits until the backend's clock reads at (1.3: a start's at):
// false when ctx ended first.
func (s *Server) holdUntil(ctx context.Context, at time.Duration) bool {
	if d := at - s.b.Now() - holdSpin; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	for i := 0; s.b.Now() < at; i++ {
		if i&63 == 63 && ctx.Err() != nil {
			return false
		}
	}
	return true
}

// startResult starts req as one of several (a batch or a stream): its
// result, as POST /v1/runs would have answered it.
func (s *Server) startResult(ctx context.Context, req StartRequest) StartResult {
	if req.Run == "" || req.Scenario == "" {
		return StartResult{Run: req.Run, Code: http.StatusBadRequest, Error: "a start request needs run and scenario"}
	}
	if code, msg := s.startOne(ctx, req); code != http.StatusAccepted {
		return StartResult{Run: req.Run, Code: code, Error: msg}
	}
	return StartResult{Run: req.Run, Code: http.StatusAccepted, Accepted: ns(s.b.Now())}
}

// starts answers a batch start (POST /v1/starts): each run started
// concurrently, each answered.
func (s *Server) starts(w http.ResponseWriter, r *http.Request) {
	var req StartsRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "a batch start needs runs")
		return
	}
	out := StartsReply{Started: make([]StartResult, len(req.Runs))}
	var wg sync.WaitGroup
	for i, st := range req.Runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Started[i] = s.startResult(r.Context(), st)
		}()
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request, run string) {
	q := r.URL.Query()
	var after int64
	var err error
	if a := q.Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			httpError(w, http.StatusBadRequest, "after="+a+": want a sequence number (an integer >= 0)")
			return
		}
	}
	wait, ok := waitArg(w, q.Get("wait"))
	if !ok {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// batch is armed by the first new event: the answer then waits up to
	// Batch for more, so a fan-out's events cost a few round trips, not
	// one each (their timestamps are the engine's: waiting delays no
	// figure). A hook waiting is answered at once: durabench resumes it.
	var batch <-chan time.Time
	for {
		s.mu.Lock()
		l := s.runs[run]
		if l == nil {
			s.mu.Unlock()
			httpError(w, http.StatusNotFound, "no run "+run)
			return
		}
		fresh := int64(len(l.events)) > after
		urgent := fresh && hookWaiting(l.events[after:])
		if fresh && batch == nil && !urgent && wait > 0 && l.status == StatusRunning {
			t := time.NewTimer(Batch)
			defer t.Stop()
			batch = t.C
		}
		if (fresh && (urgent || batch == nil)) || l.status != StatusRunning || wait == 0 {
			tl := l.timeline(run, after)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, tl)
			return
		}
		changed := l.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-batch:
			wait = 0
		case <-timer.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
}

// waitArg is a poll's wait argument ws (DefaultWait if empty), at most
// MaxWait; a bad one is answered 400 and ok is false.
func waitArg(w http.ResponseWriter, ws string) (wait time.Duration, ok bool) {
	wait = DefaultWait
	if ws != "" {
		var err error
		if wait, err = ParseWait(ws); err != nil || wait < 0 {
			httpError(w, http.StatusBadRequest, "wait="+ws+": want a duration (5000ms, 5s) or integer milliseconds")
			return 0, false
		}
	}
	return min(wait, MaxWait), true
}

// timeline is run's timeline from its event after on (the server's mu held).
func (l *runLog) timeline(run string, after int64) Timeline {
	tl := Timeline{Run: run, Status: l.status, Error: l.err, Events: []Event{}}
	if n := int64(len(l.events)); after < n {
		// Shared, not copied (a 256-branch run's span events are
		// thousands): a run's events are only ever appended, and the
		// view's capacity is capped, so no later append writes where it
		// reads.
		tl.Events = l.events[max(after, 0):n:n]
	}
	return tl
}

// hookWaiting reports whether evs hold a hook waiting: a poll answers it
// at once (durabench resumes it).
func hookWaiting(evs []Event) bool {
	return slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == EventHookWaiting })
}

// batch answers a batch timeline poll (POST /v1/timelines).
func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	var req BatchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&req); err != nil || req.Session == "" {
		httpError(w, http.StatusBadRequest, "a batch timeline poll needs session (and runs, wait, release)")
		return
	}
	wait, ok := waitArg(w, req.Wait)
	if !ok {
		return
	}
	after := make(map[string]int64, len(req.Runs))
	for _, c := range req.Runs {
		if c.Run == "" || c.After < 0 {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("runs: cursor %+v: want a run and after >= 0", c))
			return
		}
		after[c.Run] = c.After
	}
	s.mu.Lock()
	for _, run := range req.Release {
		s.forgetLocked(run)
	}
	s.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// As a timeline poll: the first news arms batch, the answer then
	// waits up to BatchPoll for more; a waiting hook is answered at once.
	var batch <-chan time.Time
	for {
		s.mu.Lock()
		sl := s.sessions[req.Session]
		var reply BatchReply
		news, urgent := false, false
		visit := func(run string, l *runLog) {
			a := after[run]
			fresh := int64(len(l.events)) > a
			if !fresh && l.status == StatusRunning {
				return
			}
			news = true
			tl := l.timeline(run, a)
			urgent = urgent || hookWaiting(tl.Events)
			reply.Timelines = append(reply.Timelines, tl)
		}
		if sl != nil {
			for run, l := range sl.runs {
				visit(run, l)
			}
		}
		for _, c := range req.Runs {
			l := s.runs[c.Run]
			switch {
			case l == nil:
				reply.Missing = append(reply.Missing, c.Run)
			case l.sess == nil || l.sess != sl:
				visit(c.Run, l)
			}
		}
		if news && batch == nil && !urgent && wait > 0 {
			t := time.NewTimer(BatchPoll)
			defer t.Stop()
			batch = t.C
		}
		if (news && (urgent || batch == nil)) || len(reply.Missing) > 0 || wait == 0 {
			s.mu.Unlock()
			if reply.Timelines == nil {
				reply.Timelines = []Timeline{}
			}
			writeJSON(w, http.StatusOK, reply)
			return
		}
		var changed chan struct{}
		if sl == nil {
			// The session has no run yet: a start creates it. Wake on
			// any change (rare: a poll before the session's first start).
			sl = &sessionLog{runs: map[string]*runLog{}, changed: make(chan struct{})}
			s.sessions[req.Session] = sl
		}
		changed = sl.changed
		// Listed runs of no session (or of another) change their own
		// channel: one of them is enough to wake on (rare).
		var other chan struct{}
		for _, c := range req.Runs {
			if l := s.runs[c.Run]; l != nil && l.sess != sl {
				other = l.changed
				break
			}
		}
		s.mu.Unlock()
		select {
		case <-changed:
		case <-other:
		case <-batch:
			wait = 0
		case <-timer.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
}

// stream serves a session stream (POST /v1/sessions/{session}/stream,
// batch 3): the starts the driver writes, one line each, are started in
// the session as a batch start's would be; each start's result and each
// of the session's runs' news is written as it happens, one line each,
// and a run is forgotten once its terminal line is written. The stream
// ends when the driver ends its request.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, session string) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		httpError(w, http.StatusInternalServerError, "session stream: "+err.Error())
		return
	}
	st := &streamLog{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	sl := s.sessions[session]
	if sl == nil {
		sl = &sessionLog{runs: map[string]*runLog{}, changed: make(chan struct{})}
		s.sessions[session] = sl
	}
	if sl.stream != nil {
		s.mu.Unlock()
		httpError(w, http.StatusConflict, "session "+session+" has a stream open")
		return
	}
	sl.stream, sl.ended = st, map[string]struct{}{}
	for _, l := range sl.runs {
		st.queueLocked(l)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		sl.stream, sl.ended = nil, nil
		for _, l := range st.dirty {
			l.queued = false
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	ctx := r.Context()
	// The starts: each on its own (one slow start must not hold the
	// others), and each where its line was read. The goroutine that reads
	// a start hands the reading on to another of the stream's workers
	// (world.Workers: the engine's start is deep) and runs the start
	// itself: the start's way to the engine then wakes nothing after its
	// line is read (a hand-off to a parked goroutine cost 40-100 µs of a
	// 3 ms fan-out's TTLS on 2 cores), and the wake-up the next line's
	// reader needs happens while this start runs. read is closed with the
	// reason the driver's lines ended once every start is answered.
	type ended struct{ err error }
	read := make(chan ended, 1)
	go func() {
		var starts sync.WaitGroup
		workers := world.NewWorkers()
		lines := NewLineReader(r.Body, maxLine)
		var next func()
		next = func() {
			req, err := nextStart(lines)
			if err != nil {
				starts.Wait()
				workers.Close()
				read <- ended{err}
				return
			}
			req.Session = session
			starts.Add(1)
			workers.Go(next)
			if res := s.startResult(ctx, req); res.Code != http.StatusAccepted {
				// An accepted start is answered by its run's timeline.
				s.mu.Lock()
				st.started = append(st.started, res)
				st.urgent = true
				s.mu.Unlock()
				st.signal()
			}
			starts.Done()
		}
		next()
	}()
	var timelines []Timeline
	var out []byte
	batch := s.StreamBatch
	if batch == 0 {
		batch = StreamBatch
	}
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	var wrote time.Time
	for {
		var end *ended
		select {
		case <-st.wake:
		case e := <-read:
			end = &e
		case <-ctx.Done():
			return
		}
		// News waits out a batch, from the last write or, after a quiet
		// spell, from its own coming, unless the driver acts on it (news
		// that comes meanwhile wakes the wait to say so): a short run's
		// first events then come with its end, not in a write of their
		// own in the middle of it.
		if time.Since(wrote) >= batch {
			wrote = time.Now()
		}
		for end == nil && batch > 0 {
			s.mu.Lock()
			urgent := st.urgent
			s.mu.Unlock()
			wait := batch - time.Since(wrote)
			if urgent || wait <= 0 {
				break
			}
			hold.Reset(wait)
			select {
			case <-hold.C:
			case <-st.wake:
			case e := <-read:
				end = &e
			case <-ctx.Done():
				return
			}
			hold.Stop()
		}
		s.mu.Lock()
		st.urgent = false
		started := st.started
		st.started = nil
		timelines = timelines[:0]
		for _, l := range st.dirty {
			l.queued = false
			if s.runs[l.run] != l {
				continue // released, or expired
			}
			if l.pushed == len(l.events) && l.status == StatusRunning {
				continue
			}
			tl := l.timeline(l.run, int64(l.pushed))
			l.pushed = len(l.events)
			if tl.Terminal() && slices.ContainsFunc(l.events, Event.Terminal) {
				// Written to its end: the driver has it all. A status
				// ahead of its terminal event keeps the run until the
				// event is written too.
				s.forgetLocked(l.run)
				sl.ended[l.run] = struct{}{}
			}
			timelines = append(timelines, tl)
		}
		st.dirty = st.dirty[:0]
		s.mu.Unlock()
		out = out[:0]
		for i := range started {
			out = appendStreamMessage(out, &StreamMessage{Started: &started[i]})
		}
		for i := range timelines {
			out = appendStreamMessage(out, &StreamMessage{Timeline: &timelines[i]})
		}
		if end != nil && end.err != nil && !errors.Is(end.err, io.EOF) {
			out = appendStreamMessage(out, &StreamMessage{Error: end.err.Error()})
		}
		if len(out) > 0 {
			if _, err := w.Write(out); err != nil {
				return
			}
			wrote = time.Now()
		}
		if end != nil || rc.Flush() != nil {
			return
		}
	}
}

// maxLine bounds one line of a session stream.
const maxLine = 16 << 20

// nextStart reads a session stream's next start: the next line that is
// not blank, which must be {"start": {...}}. Its error is the reader's
// (io.EOF once the driver's lines ended) or names the line.
func nextStart(lines *LineReader) (StartRequest, error) {
	line, err := lines.Next()
	if err != nil {
		return StartRequest{}, err
	}
	var cmd StreamCommand
	if err := decodeStreamCommand(line, &cmd); err != nil || cmd.Start == nil {
		return StartRequest{}, fmt.Errorf("a stream line must be {\"start\": {...}}: %.200q", line)
	}
	return *cmd.Start, nil
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request, run, token string) {
	var req ResumeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.ResumeID == "" {
		httpError(w, http.StatusBadRequest, "a resume request needs resume_id")
		return
	}
	s.mu.Lock()
	_, known := s.runs[run]
	s.mu.Unlock()
	if !known {
		httpError(w, http.StatusNotFound, "no run "+run)
		return
	}
	if err := s.b.Resume(r.Context(), run, token, req); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, world.ErrNotFound) {
			code = http.StatusNotFound // no such hook
		}
		httpError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorReply{Error: msg})
}

// RunDirect starts req on the backend without the protocol and waits until
// the run is over; it returns its TTLS on the backend's clock.
func (s *Server) RunDirect(ctx context.Context, req StartRequest) (time.Duration, error) {
	s.mu.Lock()
	l := s.newLogLocked(req.Run, "")
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.runs, req.Run)
		s.mu.Unlock()
	}()
	t0 := s.b.Now()
	if err := s.b.Start(ctx, req); err != nil {
		return 0, err
	}
	var last int64
	seen := 0 // the events read so far
	for {
		s.mu.Lock()
		status, errMsg, changed := l.status, l.err, l.changed
		for _, ev := range l.events[seen:] {
			if ev.Kind == EventStepCompleted {
				last = max(last, ev.At)
			}
		}
		seen = len(l.events)
		s.mu.Unlock()
		switch status {
		case StatusCompleted:
			return time.Duration(last) - t0, nil
		case StatusFailed:
			return 0, fmt.Errorf("run %s failed: %s", req.Run, errMsg)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
