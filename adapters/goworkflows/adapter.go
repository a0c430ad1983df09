package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/monoprocess"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
)

// Version is the go-workflows version the adapter is built against (go.mod).
const Version = "v1.2.0"

// Config is the adapter's engine set-up (its command-line flags).
type Config struct {
	// SQLite is the database file; "" is a private in-memory database.
	SQLite string
	// Keep keeps a database file the adapter created (it is removed on
	// Close otherwise; a file that existed before is never removed).
	Keep bool
	// Monoprocess wraps the sqlite backend in go-workflows' monoprocess
	// backend: pollers wait on an in-process signal instead of sleeping
	// PollInterval between empty polls.
	Monoprocess bool
	// Pollers and the bound on concurrently executing tasks (0: no bound)
	// of the workflow and activity workers.
	WorkflowPollers, ActivityPollers      int
	MaxParallelWorkflows, MaxParallelActs int
	// PollInterval is the pause after an empty poll (both workers).
	PollInterval time.Duration
	// CacheSize is the workflow executor cache size (instances kept in
	// memory between their tasks, so they need no replay).
	CacheSize int
	// CacheTTL is how long an idle instance stays in that cache.
	CacheTTL time.Duration
	// MaxHistory is go-workflows' limit on a workflow's history events.
	MaxHistory int64
	// MaxBranches and MaxSteps are the limits the adapter declares.
	MaxBranches, MaxSteps int
	// Log is the engine's logger (nil: warnings and errors to stderr).
	Log *slog.Logger
}

// DefaultConfig is the set-up of the README.
func DefaultConfig() Config {
	return Config{
		Monoprocess:     true,
		WorkflowPollers: worker.DefaultOptions.WorkflowPollers,
		ActivityPollers: worker.DefaultOptions.ActivityPollers,
		PollInterval:    worker.DefaultOptions.WorkflowPollingInterval,
		CacheSize:       worker.DefaultOptions.WorkflowExecutorCacheSize,
		CacheTTL:        worker.DefaultOptions.WorkflowExecutorCacheTTL,
		MaxHistory:      backend.DefaultOptions.MaxHistorySize,
		MaxBranches:     2048,
		MaxSteps:        2500,
	}
}

// Adapter is go-workflows (sqlite backend, one in-process worker) served
// as a durabench target.
type Adapter struct {
	cfg   Config
	epoch time.Time
	sink  protocol.Sink
	acts  *activities

	session string // instance ids are run + "@" + session (a reused file holds older runs)
	created bool   // the adapter created cfg.SQLite

	db      backend.Backend
	wf      *worker.Worker
	cl      *client.Client
	stopWkr context.CancelFunc
	closing atomic.Bool // Close has begun

	mu        sync.Mutex
	runs      map[string]*runState // by durabench run id
	instances map[string]string    // instance id -> run id
	// finishedRuns are the finished runs still in runs, oldest first.
	finishedRuns []string
}

// keepFinished is how many finished runs the adapter remembers (as many as
// protocol.Server keeps timelines of).
const keepFinished = 4096

type stepKey struct{ stage, index int }

// runState is what the adapter keeps of a live run to report it exactly.
type runState struct {
	instance  string
	token     string
	attempts  map[stepKey]int  // deliveries of each step's body so far
	completed map[stepKey]bool // steps already reported completed
	hookSent  map[string]bool  // hook events already reported, by kind
	resumes   map[string]bool  // resume ids already applied
	done      bool
	// trace is what the adapter measures for the run's spans (nil: its
	// start did not ask for them; spans.go).
	trace *runTrace
}

// New returns the adapter (NewServer opens it).
func New(cfg Config) *Adapter {
	return &Adapter{cfg: cfg, epoch: time.Now(), runs: map[string]*runState{}, instances: map[string]string{},
		session: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// Info declares the scenarios the adapter runs and its verified limits.
func (a *Adapter) Info() protocol.Info {
	// Minor 2: protocol 1.2, span events (spans.go).
	return protocol.Info{Protocol: protocol.ProtocolVersion, Minor: 2, Engine: "go-workflows", Version: Version + " sqlite",
		Clock: "monotonic ns since the adapter started",
		Scenarios: []protocol.Scenario{
			{Name: "fanout", Max: map[string]int{"branches": a.cfg.MaxBranches}},
			{Name: "sequential", Max: map[string]int{"steps": a.cfg.MaxSteps}},
			{Name: "hook-step"},
			{Name: "step"},
		}}
}

// Now is the adapter's monotonic clock.
func (a *Adapter) Now() time.Duration { return time.Since(a.epoch) }

func (a *Adapter) now() int64 { return int64(a.Now()) }

// Open creates the sqlite backend and starts the worker.
func (a *Adapter) Open(ctx context.Context, sink protocol.Sink) (err error) {
	a.sink = sink
	a.acts = &activities{a: a}
	h := slog.Handler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if a.cfg.Log != nil {
		h = a.cfg.Log.Handler()
	}
	log := slog.New(&quietClose{Handler: h, closing: &a.closing})
	opts := sqlite.WithBackendOptions(backend.WithLogger(log), backend.WithMaxHistorySize(a.cfg.MaxHistory))
	var sb backend.Backend
	func() {
		// The sqlite constructors panic on a failure to open or migrate.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("sqlite backend: %v", r)
			}
		}()
		if a.cfg.SQLite == "" {
			sb = sqlite.NewInMemoryBackend(opts)
			return
		}
		if _, statErr := os.Stat(a.cfg.SQLite); errors.Is(statErr, os.ErrNotExist) {
			a.created = true
		}
		sb = sqlite.NewSqliteBackend(a.cfg.SQLite, opts)
	}()
	if err != nil {
		a.removeFiles()
		return err
	}
	if a.cfg.Monoprocess {
		sb = monoprocess.NewMonoprocessBackend(sb)
	}
	a.db = &observed{Backend: sb, a: a}
	wo := worker.DefaultOptions
	wo.WorkflowPollers, wo.ActivityPollers = a.cfg.WorkflowPollers, a.cfg.ActivityPollers
	wo.MaxParallelWorkflowTasks, wo.MaxParallelActivityTasks = a.cfg.MaxParallelWorkflows, a.cfg.MaxParallelActs
	wo.WorkflowPollingInterval, wo.ActivityPollingInterval = a.cfg.PollInterval, a.cfg.PollInterval
	wo.WorkflowExecutorCacheSize, wo.WorkflowExecutorCacheTTL = a.cfg.CacheSize, a.cfg.CacheTTL
	a.wf = worker.New(a.db, &wo)
	if err := a.wf.RegisterWorkflow(a.Scenario); err != nil {
		_ = a.closeDB()
		return err
	}
	if err := a.wf.RegisterActivity(a.acts); err != nil {
		_ = a.closeDB()
		return err
	}
	wctx, cancel := context.WithCancel(context.Background())
	if err := a.wf.Start(wctx); err != nil {
		cancel()
		_ = a.closeDB()
		return err
	}
	a.stopWkr = cancel
	a.cl = client.New(a.db)
	return nil
}

// Start validates the request and creates the workflow instance.
func (a *Adapter) Start(ctx context.Context, req protocol.StartRequest) error {
	startReq := a.now()
	in, err := a.input(req)
	if err != nil {
		return err
	}
	st := &runState{instance: req.Run + "@" + a.session, token: in.Token, attempts: map[stepKey]int{},
		completed: map[stepKey]bool{}, hookSent: map[string]bool{}, resumes: map[string]bool{}}
	if req.Spans {
		st.trace = newRunTrace(startReq)
	}
	a.mu.Lock()
	if _, dup := a.runs[req.Run]; dup {
		a.mu.Unlock()
		return fmt.Errorf("run %s exists", req.Run)
	}
	a.runs[req.Run] = st
	a.instances[st.instance] = req.Run
	a.mu.Unlock()
	// Recorded first: the workflow may run before CreateWorkflowInstance
	// returns. Stamped as the client stamps the instance's
	// WorkflowExecutionStarted event.
	a.sink.Event(req.Run, protocol.Event{Kind: protocol.EventRunStarted, At: a.now(), Source: protocol.SourceSDK})
	if _, err := a.cl.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: st.instance}, a.Scenario, in); err != nil {
		a.mu.Lock()
		delete(a.runs, req.Run)
		delete(a.instances, st.instance)
		a.mu.Unlock()
		return fmt.Errorf("go-workflows: create instance: %w", err)
	}
	return nil
}

// input turns a start request into the workflow's input (ErrUnsupported
// for what the adapter does not run).
func (a *Adapter) input(req protocol.StartRequest) (RunInput, error) {
	in := RunInput{Run: req.Run, Scenario: req.Scenario}
	var supported bool
	for _, s := range a.Info().Scenarios {
		supported = supported || s.Name == req.Scenario
	}
	sc, err := scenarios.Get(req.Scenario)
	if !supported || err != nil {
		return in, fmt.Errorf("%w: go-workflows adapter has no scenario %q", protocol.ErrUnsupported, req.Scenario)
	}
	_, v, err := sc.Build(scenarios.Values(req.Options))
	if err != nil {
		return in, fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	if ok, why := a.Info().Supports(req.Scenario, v); !ok {
		return in, fmt.Errorf("%w: %s", protocol.ErrUnsupported, why)
	}
	in.Body = v.Duration("body")
	switch req.Scenario {
	case "fanout":
		in.Count = v.Int("branches")
	case "sequential":
		in.Count = v.Int("steps")
	case "step":
		in.Count = 1
	case "hook-step":
		in.Token = req.Run + "#hook0"
	}
	return in, nil
}

// Resume signals the run's workflow; a resume id already applied is a no-op.
func (a *Adapter) Resume(ctx context.Context, run, token string, req protocol.ResumeRequest) error {
	a.mu.Lock()
	st := a.runs[run]
	switch {
	case st == nil:
		a.mu.Unlock()
		return fmt.Errorf("no run %s", run)
	case token != st.token:
		a.mu.Unlock()
		return fmt.Errorf("run %s has no hook %q", run, token)
	case st.resumes[req.ResumeID]:
		a.mu.Unlock()
		return nil
	case st.done:
		a.mu.Unlock()
		return fmt.Errorf("run %s is over", run)
	}
	st.resumes[req.ResumeID] = true
	a.mu.Unlock()
	payload := req.Payload
	if payload == nil {
		payload = []byte{}
	}
	if err := a.cl.SignalWorkflow(ctx, st.instance, hookSignal, payload); err != nil {
		a.mu.Lock()
		delete(st.resumes, req.ResumeID)
		a.mu.Unlock()
		return fmt.Errorf("go-workflows: signal %s: %w", st.instance, err)
	}
	return nil
}

// Close stops the worker (it finishes the tasks it holds), closes the
// database and removes a database file it created.
func (a *Adapter) Close(ctx context.Context) error {
	if a.stopWkr != nil {
		a.closing.Store(true)
		a.stopWkr()
		done := make(chan struct{})
		go func() { _ = a.wf.WaitForCompletion(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return a.closeDB()
}

func (a *Adapter) closeDB() error {
	var err error
	if a.db != nil {
		err = a.db.Close()
	}
	a.removeFiles()
	return err
}

func (a *Adapter) removeFiles() {
	if !a.created || a.cfg.Keep {
		return
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(a.cfg.SQLite + suffix)
	}
}

// run returns the live state of run (nil when unknown or over).
func (a *Adapter) liveLocked(run string) *runState {
	st := a.runs[run]
	if st == nil || st.done {
		return nil
	}
	return st
}

// stepStarted counts a delivery of a step body and reports its start.
func (a *Adapter) stepStarted(in StepInput) (int, bool) {
	at := a.now()
	a.mu.Lock()
	st := a.liveLocked(in.Run)
	if st == nil {
		a.mu.Unlock()
		return 0, false
	}
	k := stepKey{in.Stage, in.Index}
	st.attempts[k]++
	attempt := st.attempts[k]
	if st.trace != nil {
		st.trace.step(k).body = interval{start: at}
	}
	a.mu.Unlock()
	a.sink.Event(in.Run, protocol.Event{Kind: protocol.EventStepStarted, At: at, Source: protocol.SourceWorker,
		Stage: in.Stage, Index: in.Index, Attempt: attempt})
	return attempt, true
}

// stepCompleted reports a step body's successful end, once per step.
func (a *Adapter) stepCompleted(in StepInput, attempt int) {
	at := a.now()
	a.mu.Lock()
	st := a.liveLocked(in.Run)
	k := stepKey{in.Stage, in.Index}
	if st == nil || st.completed[k] {
		a.mu.Unlock()
		return
	}
	st.completed[k] = true
	if st.trace != nil {
		st.trace.step(k).body.end = at
	}
	a.mu.Unlock()
	a.sink.Event(in.Run, protocol.Event{Kind: protocol.EventStepCompleted, At: at, Source: protocol.SourceWorker,
		Stage: in.Stage, Index: in.Index, Attempt: attempt})
}

func (a *Adapter) stepFailed(in StepInput, attempt int, err error) {
	at := a.now()
	a.mu.Lock()
	st := a.liveLocked(in.Run)
	a.mu.Unlock()
	if st != nil {
		a.sink.Event(in.Run, protocol.Event{Kind: protocol.EventStepFailed, At: at, Source: protocol.SourceWorker,
			Stage: in.Stage, Index: in.Index, Attempt: attempt, Error: err.Error()})
	}
}

// hookEvent reports hook_waiting or hook_received once per run.
func (a *Adapter) hookEvent(run, kind, token string) {
	at := a.now()
	a.mu.Lock()
	st := a.liveLocked(run)
	if st == nil || st.hookSent[kind] {
		a.mu.Unlock()
		return
	}
	st.hookSent[kind] = true
	a.mu.Unlock()
	a.sink.Event(run, protocol.Event{Kind: kind, At: at, Source: protocol.SourceWorker, Token: token})
}

// finished reports a run's end once its WorkflowExecutionFinished event is
// committed, and forgets the run.
func (a *Adapter) finished(instance string, failed bool, msg string) {
	at := a.now()
	a.mu.Lock()
	run, ok := a.instances[instance]
	st := a.runs[run]
	if !ok || st == nil || st.done {
		a.mu.Unlock()
		return
	}
	// Kept (without its step tables) so that a repeated resume stays a
	// no-op; the oldest finished runs are forgotten.
	tr := st.trace
	st.done, st.attempts, st.completed, st.trace = true, nil, nil, nil
	delete(a.instances, instance)
	a.finishedRuns = append(a.finishedRuns, run)
	if len(a.finishedRuns) > keepFinished {
		delete(a.runs, a.finishedRuns[0])
		a.finishedRuns = a.finishedRuns[1:]
	}
	a.mu.Unlock()
	// The run's spans, before its terminal event (which ends what
	// durabench follows of it).
	if tr != nil {
		if spans := buildSpans(tr); len(spans) > 0 {
			if es, ok := a.sink.(eventsSink); ok {
				es.Events(run, spans)
			} else {
				for _, sp := range spans {
					a.sink.Event(run, sp)
				}
			}
		}
	}
	ev := protocol.Event{Kind: protocol.EventRunCompleted, At: at, Source: protocol.SourceHistory}
	if failed {
		ev.Kind, ev.Error = protocol.EventRunFailed, msg
	}
	a.sink.Event(run, ev)
	a.sink.Finished(run, failed, msg)
}

// observed wraps the backend the worker and client use, to see each
// workflow task commit: the one that commits a WorkflowExecutionFinished
// event ends its run (engine history, no polling).
type observed struct {
	backend.Backend
	a *Adapter
}

func (o *observed) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executed, activityEvents, timerEvents []*history.Event, workflowEvents []*history.WorkflowEvent) error {
	start := o.a.now()
	if err := o.Backend.CompleteWorkflowTask(ctx, task, state, executed, activityEvents, timerEvents, workflowEvents); err != nil {
		return err
	}
	o.a.noteWorkflowTaskCompleted(task.WorkflowInstance.InstanceID, start, o.a.now(), executed)
	if state != core.WorkflowInstanceStateFinished {
		return nil
	}
	failed, msg := false, ""
	for _, e := range executed {
		switch e.Type {
		case history.EventType_WorkflowExecutionFinished:
			if attr, ok := e.Attributes.(*history.ExecutionCompletedAttributes); ok && attr.Error != nil {
				failed, msg = true, attr.Error.Message
			}
		case history.EventType_WorkflowExecutionCanceled:
			failed, msg = true, "workflow canceled"
		case history.EventType_WorkflowExecutionTerminated:
			failed, msg = true, "workflow terminated"
		}
	}
	o.a.finished(task.WorkflowInstance.InstanceID, failed, msg)
	return nil
}

// quietClose drops the pollers' "error polling task" records once Close has
// begun: a poll interrupted by the worker's shutdown is logged as an error
// by go-workflows (sqlite answers "interrupted", not context.Canceled).
type quietClose struct {
	slog.Handler
	closing *atomic.Bool
}

func (q *quietClose) Handle(ctx context.Context, r slog.Record) error {
	if q.closing.Load() && r.Message == "error polling task" {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q *quietClose) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &quietClose{Handler: q.Handler.WithAttrs(attrs), closing: q.closing}
}

func (q *quietClose) WithGroup(name string) slog.Handler {
	return &quietClose{Handler: q.Handler.WithGroup(name), closing: q.closing}
}
