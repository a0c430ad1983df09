package target

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxWait bounds a timeline long poll.
const MaxWait = 30 * time.Second

// Batch is how long a timeline poll that has new events waits for more
// before it answers (at once for a waiting hook or a finished run).
const Batch = 10 * time.Millisecond

// keepFinished is how many finished runs' timelines a server keeps.
const keepFinished = 4096

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
	// Start starts a run once the engine accepted it.
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
	b Backend

	mu       sync.Mutex
	runs     map[string]*runLog
	finished []string // finished runs, oldest first (keepFinished)
}

type runLog struct {
	events  []Event
	status  string
	err     string
	changed chan struct{}
}

// NewServer opens b and returns a server for it.
func NewServer(ctx context.Context, b Backend) (*Server, error) {
	s := &Server{b: b, runs: map[string]*runLog{}}
	if err := b.Open(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the backend.
func (s *Server) Close(ctx context.Context) error { return s.b.Close(ctx) }

func (s *Server) logLocked(run string) *runLog {
	l := s.runs[run]
	if l == nil {
		l = &runLog{status: StatusRunning, changed: make(chan struct{})}
		s.runs[run] = l
	}
	return l
}

// Event implements Sink.
func (s *Server) Event(run string, ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(run)
	ev.Seq = int64(len(l.events) + 1)
	l.events = append(l.events, ev)
	close(l.changed)
	l.changed = make(chan struct{})
}

// Finished implements Sink.
func (s *Server) Finished(run string, failed bool, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logLocked(run)
	if l.status != StatusRunning {
		return
	}
	l.status, l.err = StatusCompleted, ""
	if failed {
		l.status, l.err = StatusFailed, msg
	}
	close(l.changed)
	l.changed = make(chan struct{})
	s.finished = append(s.finished, run)
	if len(s.finished) > keepFinished {
		delete(s.runs, s.finished[0])
		s.finished = s.finished[1:]
	}
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
		writeJSON(w, http.StatusOK, s.b.Info())
	case r.Method == http.MethodGet && path == "clock":
		writeJSON(w, http.StatusOK, ClockReply{Now: ns(s.b.Now())})
	case r.Method == http.MethodPost && path == "runs":
		s.start(w, r)
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
	s.mu.Lock()
	_, dup := s.runs[req.Run]
	if !dup {
		s.logLocked(req.Run)
	}
	s.mu.Unlock()
	if dup {
		httpError(w, http.StatusConflict, "run "+req.Run+" exists")
		return
	}
	if err := s.b.Start(r.Context(), req); err != nil {
		s.mu.Lock()
		delete(s.runs, req.Run)
		s.mu.Unlock()
		code := http.StatusInternalServerError
		if errors.Is(err, ErrUnsupported) {
			code = http.StatusUnprocessableEntity
		}
		httpError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, StartReply{Run: req.Run, Accepted: ns(s.b.Now())})
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request, run string) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	wait = min(max(wait, 0), MaxWait)
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
		urgent := fresh && slices.ContainsFunc(l.events[max(after, 0):], func(e Event) bool { return e.Kind == EventHookWaiting })
		if fresh && batch == nil && !urgent && wait > 0 && l.status == StatusRunning {
			t := time.NewTimer(Batch)
			defer t.Stop()
			batch = t.C
		}
		if (fresh && (urgent || batch == nil)) || l.status != StatusRunning || wait == 0 {
			tl := Timeline{Run: run, Status: l.status, Error: l.err, Events: []Event{}}
			if after < int64(len(l.events)) {
				tl.Events = append(tl.Events, l.events[max(after, 0):]...)
			}
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

func (s *Server) resume(w http.ResponseWriter, r *http.Request, run, token string) {
	var req ResumeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.ResumeID == "" {
		httpError(w, http.StatusBadRequest, "a resume request needs resume_id")
		return
	}
	if err := s.b.Resume(r.Context(), run, token, req); err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
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
