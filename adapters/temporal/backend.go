package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
)

// Versions of the Temporal modules this adapter is built with (go.mod).
const (
	serverVersion = "v1.32.0"
	sdkVersion    = "v1.44.0"
)

// Names the adapter registers in Temporal.
const (
	workflowName = "durabench"
	activityName = "durabench-step"
	signalName   = "durabench-resume"
	// workflowPrefix starts every workflow id: durabench's run id follows.
	workflowPrefix = "durabench-"
)

// supported are the scenarios of durabench's book the adapter runs.
var supported = []string{"fanout", "sequential", "hook-step", "step"}

// Config is the adapter's configuration (its flags).
type Config struct {
	// Address is a Temporal frontend host:port; empty starts an in-process
	// server (SQLite in memory) that Close removes.
	Address   string
	Namespace string
	// TaskQueue is the worker's task queue; empty picks a fresh random
	// one, so two adapters on one cluster never run each other's steps.
	TaskQueue string
	// Partitions is the in-process server's task queue partitions.
	Partitions int
	// StockServer runs the in-process server with Temporal's default
	// dynamic config instead of the latency settings (devserver.go tuned).
	StockServer bool
	// Worker tuning (see README.md).
	ActivityPollers  int
	WorkflowPollers  int
	MaxActivities    int
	MaxWorkflowTasks int
	StickyCacheSize  int
	DisableEager     bool
	MaxBranches      int
	MaxSteps         int
	Verbose          bool
	WorkflowTimeout  time.Duration
	// NoSpans sends no span events, even when a start asks for them
	// (1.1 in the info): no history is read at a run's end and the
	// worker's calls are not timed.
	NoSpans bool
}

// DefaultConfig is what the flags default to.
func DefaultConfig() Config {
	return Config{
		Namespace:        "default",
		Partitions:       1,
		ActivityPollers:  16,
		WorkflowPollers:  4,
		MaxActivities:    4096,
		MaxWorkflowTasks: 1000,
		StickyCacheSize:  10000,
		MaxBranches:      1024,
		MaxSteps:         1020,
		WorkflowTimeout:  time.Hour,
	}
}

// runInput is the workflow's argument.
type runInput struct {
	Scenario string
	Branches int
	Steps    int
	Body     time.Duration
	Token    string
}

type stepKey struct{ stage, index int }

// runState is what the adapter tracks of one run.
type runState struct {
	workflowID string
	runID      string
	token      string
	// started is set once run_started is recorded; events that arrive
	// before it wait in pending, so run_started is always seq 1.
	started   bool
	pending   []protocol.Event
	completed map[stepKey]bool
	hookSeen  map[string]bool // hook_waiting / hook_received recorded
	resumed   map[string]bool // resume ids
	closing   bool            // the workflow function returned
	// finishing is set once the run's end is seen: its history is read and
	// its spans sent, then its terminal event (finished).
	finishing bool
	finished  bool
	// trace is what the adapter measured of the run for its spans.
	trace *runTrace
}

// Backend serves Temporal over the durabench target protocol.
type Backend struct {
	cfg   Config
	epoch time.Time
	log   *slog.Logger

	sink    protocol.Sink
	dev     *devServer
	c       client.Client
	w       worker.Worker
	version string

	ctx    context.Context // the backend's life: run watchers end with it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	runs     map[string]*runState
	finished []string // finished runs, oldest first (keepFinished)
	// tokens are the task tokens of tasks the worker holds (grpctrace.go).
	tokens map[string]tokenRef
	// wallDrift is the largest difference seen between the wall clock and
	// the monotonic clock since epoch (spans.go converts history times
	// with the offset taken at epoch), ns.
	wallDrift int64
}

// NewBackend returns the backend (Open starts it).
func NewBackend(cfg Config) *Backend {
	lvl := slog.LevelWarn
	if cfg.Verbose {
		lvl = slog.LevelInfo
	}
	return &Backend{cfg: cfg, epoch: time.Now(), runs: map[string]*runState{}, tokens: map[string]tokenRef{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))}
}

// Now is the adapter's clock: monotonic time since the backend was made.
func (b *Backend) Now() time.Duration { return time.Since(b.epoch) }

func (b *Backend) now() int64 { return int64(b.Now()) }

// wall puts a wall-clock time (the server's history times) on the adapter's
// clock, with the one offset measured when the backend was made: epoch's
// wall reading is the instant the monotonic clock starts.
func (b *Backend) wall(t time.Time) int64 { return t.UnixNano() - b.epoch.UnixNano() }

// Info names Temporal, its versions and the four scenarios.
func (b *Backend) Info() protocol.Info {
	// Minor 2: protocol 1.2, span events (spans.go).
	minor := 2
	if b.cfg.NoSpans {
		minor = 1
	}
	info := protocol.Info{Protocol: protocol.ProtocolVersion, Minor: minor, Engine: "temporal", Version: b.version,
		Clock: "monotonic ns since the adapter started"}
	for _, s := range supported {
		sc := protocol.Scenario{Name: s}
		switch s {
		case "fanout":
			sc.Max = map[string]int{"branches": b.cfg.MaxBranches}
		case "sequential":
			sc.Max = map[string]int{"steps": b.cfg.MaxSteps}
		}
		info.Scenarios = append(info.Scenarios, sc)
	}
	return info
}

// Open starts the in-process server (unless an address is set), connects a
// client and starts the worker.
func (b *Backend) Open(ctx context.Context, sink protocol.Sink) error {
	b.sink = sink
	b.ctx, b.cancel = context.WithCancel(context.Background())
	addr := b.cfg.Address
	where := "external server " + addr
	if addr == "" {
		dev, err := startDevServer(devServerOptions{Namespace: b.cfg.Namespace, Partitions: b.cfg.Partitions, Stock: b.cfg.StockServer})
		if err != nil {
			return err
		}
		b.dev, addr = dev, dev.hostPort
		where = fmt.Sprintf("in-process server %s (sqlite in memory, stock dynamic config %v)", addr, b.cfg.StockServer)
	}
	copts := client.Options{HostPort: addr, Namespace: b.cfg.Namespace,
		Logger: sdklog.NewStructuredLogger(b.log), Identity: fmt.Sprintf("durabench-target-temporal@%d", os.Getpid())}
	if !b.cfg.NoSpans {
		// The worker's calls, timed for the runs' spans (grpctrace.go).
		copts.ConnectionOptions.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(b.traceCalls)}
	}
	c, err := client.DialContext(ctx, copts)
	if err != nil {
		b.stopServer()
		return fmt.Errorf("connect to temporal at %s: %w", addr, err)
	}
	b.c = c
	b.version = fmt.Sprintf("server %s (in-process), sdk %s", serverVersion, sdkVersion)
	if b.cfg.StockServer {
		b.version = fmt.Sprintf("server %s (in-process, stock config), sdk %s", serverVersion, sdkVersion)
	}
	if b.dev == nil {
		b.version = "server (external), sdk " + sdkVersion
		if si, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{}); err == nil && si.GetServerVersion() != "" {
			b.version = fmt.Sprintf("server v%s (external), sdk %s", strings.TrimPrefix(si.GetServerVersion(), "v"), sdkVersion)
		}
	}
	if b.cfg.TaskQueue == "" {
		var r [6]byte
		_, _ = rand.Read(r[:])
		b.cfg.TaskQueue = "durabench-" + hex.EncodeToString(r[:])
	}
	worker.SetStickyWorkflowCacheSize(b.cfg.StickyCacheSize)
	w := worker.New(c, b.cfg.TaskQueue, worker.Options{
		MaxConcurrentActivityTaskPollers:       b.cfg.ActivityPollers,
		MaxConcurrentWorkflowTaskPollers:       b.cfg.WorkflowPollers,
		MaxConcurrentActivityExecutionSize:     b.cfg.MaxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: b.cfg.MaxWorkflowTasks,
		DisableEagerActivities:                 b.cfg.DisableEager,
		WorkflowPanicPolicy:                    worker.FailWorkflow,
		Interceptors:                           []interceptor.WorkerInterceptor{&stepInterceptor{b: b}},
	})
	w.RegisterWorkflowWithOptions(b.workflow, workflow.RegisterOptions{Name: workflowName})
	w.RegisterActivityWithOptions(stepBody, activity.RegisterOptions{Name: activityName})
	if err := w.Start(); err != nil {
		c.Close()
		b.stopServer()
		return fmt.Errorf("start temporal worker: %w", err)
	}
	b.w = w
	b.log.Info("temporal target ready", "temporal", where, "namespace", b.cfg.Namespace, "task_queue", b.cfg.TaskQueue)
	return nil
}

func (b *Backend) stopServer() {
	if b.dev != nil {
		if err := b.dev.Stop(); err != nil {
			b.log.Warn("stop temporal server", "err", err)
		}
		b.dev = nil
	}
}

// Close terminates the runs this adapter started that are still open (on an
// external server; the in-process one goes away whole), stops the worker,
// the client and the in-process server.
func (b *Backend) Close(ctx context.Context) error {
	if b.c != nil && b.dev == nil {
		b.mu.Lock()
		var open []*runState
		for _, st := range b.runs {
			if !st.finished {
				open = append(open, st)
			}
		}
		b.mu.Unlock()
		for _, st := range open {
			err := b.c.TerminateWorkflow(ctx, st.workflowID, st.runID, "durabench target stopped")
			if err != nil {
				b.log.Info("terminate run", "workflow", st.workflowID, "err", err)
			}
		}
	}
	if b.cancel != nil {
		b.cancel()
	}
	if b.w != nil {
		b.w.Stop()
	}
	b.wg.Wait()
	if b.c != nil {
		b.c.Close()
	}
	b.stopServer()
	return nil
}

// Start validates the scenario, starts the workflow (the start is durable
// once ExecuteWorkflow returns) and records run_started.
func (b *Backend) Start(ctx context.Context, req protocol.StartRequest) error {
	in, err := b.input(req)
	if err != nil {
		return err
	}
	in.Token = "hook-" + req.Run
	st := &runState{workflowID: workflowPrefix + req.Run, token: in.Token,
		completed: map[stepKey]bool{}, hookSeen: map[string]bool{}, resumed: map[string]bool{}}
	if req.Spans && !b.cfg.NoSpans {
		// Spans cost a history read at the run's end: only when asked.
		st.trace = newRunTrace(b.now())
	}
	b.mu.Lock()
	if _, dup := b.runs[req.Run]; dup {
		b.mu.Unlock()
		return fmt.Errorf("run %s exists", req.Run)
	}
	b.runs[req.Run] = st
	b.mu.Unlock()
	wr, err := b.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       st.workflowID,
		TaskQueue:                b.cfg.TaskQueue,
		WorkflowExecutionTimeout: b.cfg.WorkflowTimeout,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflowName, in)
	at := b.now()
	if err != nil {
		b.mu.Lock()
		delete(b.runs, req.Run)
		b.mu.Unlock()
		return fmt.Errorf("start workflow %s: %w", st.workflowID, err)
	}
	b.mu.Lock()
	st.runID = wr.GetRunID()
	st.started = true
	pending := st.pending
	st.pending = nil
	// Recorded under b.mu so that no event of the run slips in between.
	b.sink.Event(req.Run, protocol.Event{Kind: protocol.EventRunStarted, At: at, Source: protocol.SourceSDK})
	for _, ev := range pending {
		b.sink.Event(req.Run, ev)
	}
	b.mu.Unlock()
	b.wg.Add(1)
	go b.watch(req.Run, wr)
	return nil
}

// input turns a start request into the workflow's argument, or
// protocol.ErrUnsupported.
func (b *Backend) input(req protocol.StartRequest) (runInput, error) {
	ok := false
	for _, s := range supported {
		ok = ok || s == req.Scenario
	}
	if !ok {
		return runInput{}, fmt.Errorf("%w: temporal target runs %s, not %q", protocol.ErrUnsupported,
			strings.Join(supported, ", "), req.Scenario)
	}
	sc, err := scenarios.Get(req.Scenario)
	if err != nil {
		return runInput{}, fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	v := scenarios.Values{}
	for k, val := range req.Options {
		v[k] = val
	}
	if err := sc.Validate(v); err != nil {
		return runInput{}, fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	v = sc.ApplyDefaults(v)
	in := runInput{Scenario: req.Scenario, Branches: v.Int("branches"), Steps: v.Int("steps"), Body: v.Duration("body")}
	if in.Branches > b.cfg.MaxBranches {
		return runInput{}, fmt.Errorf("%w: branches %d is over %d", protocol.ErrUnsupported, in.Branches, b.cfg.MaxBranches)
	}
	if in.Steps > b.cfg.MaxSteps {
		return runInput{}, fmt.Errorf("%w: steps %d is over %d", protocol.ErrUnsupported, in.Steps, b.cfg.MaxSteps)
	}
	return in, nil
}

// The run's end. Temporal has no push notification of a workflow's close
// to a client other than the long poll that WorkflowRun.Get makes on its
// history, and that poll now and then misses the close and answers only
// when it expires, 20 s later (seen in about one run in 40 here). So the
// end is taken from two places, whichever sees it first:
//
//   - closing: the workflow function returned in the worker (not in a
//     replay); the worker's RespondWorkflowTaskCompleted with the close
//     command follows. DescribeWorkflowExecution is polled every
//     millisecond until the server says the run is closed: the recorded
//     time is when the close was seen, at most about 1 ms after it was
//     durable.
//   - watch: WorkflowRun.Get returned (every other end: terminated, timed
//     out, failed in a way the workflow code did not return from).

// watch waits for the workflow's result (the SDK long-polls its history for
// the close event) and records the run's end unless closing did.
func (b *Backend) watch(run string, wr client.WorkflowRun) {
	defer b.wg.Done()
	err := wr.Get(b.ctx, nil)
	at := b.now()
	if b.ctx.Err() != nil {
		return // the adapter is stopping
	}
	b.finish(run, at, err)
}

// closing is called by the workflow code when its function returns.
func (b *Backend) closing(run string) {
	b.mu.Lock()
	st := b.runs[run]
	if st == nil || st.finished || st.closing {
		b.mu.Unlock()
		return
	}
	st.closing = true
	wid, rid := st.workflowID, st.runID
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		deadline := time.Now().Add(closeWait)
		for b.ctx.Err() == nil && time.Now().Before(deadline) {
			d, err := b.c.DescribeWorkflowExecution(b.ctx, wid, rid)
			if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				at := b.now()
				var res error
				if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
					// Closed: Get answers at once, with the failure.
					ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
					res = b.c.GetWorkflow(ctx, wid, rid).Get(ctx, nil)
					cancel()
					if res == nil {
						res = fmt.Errorf("workflow %s", d.GetWorkflowExecutionInfo().GetStatus())
					}
				}
				b.finish(run, at, res)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
}

// closeWait bounds how long closing polls (then watch is left to it).
const closeWait = 30 * time.Second

// finish records run_completed or run_failed, once: first the run's span
// events, from its history (read now, before the terminal event, which ends
// what durabench follows of the run), then the terminal event. at is when
// the end was seen.
func (b *Backend) finish(run string, at int64, err error) {
	b.mu.Lock()
	st := b.runs[run]
	if st == nil || st.finished || st.finishing {
		b.mu.Unlock()
		return
	}
	st.finishing = true
	tr := st.trace
	if tr != nil {
		for _, t := range tr.tokens {
			if ref, ok := b.tokens[t]; ok && ref.st == st {
				delete(b.tokens, t)
			}
		}
	}
	wid, rid := st.workflowID, st.runID
	b.mu.Unlock()
	spans := b.spans(wid, rid, tr)
	b.mu.Lock()
	st.finished = true
	st.trace = nil
	if st.started {
		if es, ok := b.sink.(eventsSink); ok {
			es.Events(run, spans) // one wake-up of the run's polls
		} else {
			for _, sp := range spans {
				b.sink.Event(run, sp)
			}
		}
	}
	ev := protocol.Event{Kind: protocol.EventRunCompleted, At: at, Source: protocol.SourceSDK}
	if err != nil {
		ev.Kind, ev.Error = protocol.EventRunFailed, err.Error()
	}
	// Recorded under b.mu, like every event of the run, so none of its
	// events can follow its end.
	b.sink.Event(run, ev)
	b.sink.Finished(run, err != nil, ev.Error)
	// A finished run's state stays a while (as the server keeps its
	// timeline) so that a repeated resume of it is still a no-op.
	b.finished = append(b.finished, run)
	if len(b.finished) > keepFinished {
		delete(b.runs, b.finished[0])
		b.finished = b.finished[1:]
	}
	b.mu.Unlock()
}

// spans reads the run's history and returns its span events (none when
// the history cannot be read: the run then has no spans, and the log says
// so).
func (b *Backend) spans(wid, rid string, tr *runTrace) []protocol.Event {
	if tr == nil || b.ctx.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	var hist []*historypb.HistoryEvent
	it := b.c.GetWorkflowHistory(ctx, wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.log.Warn("read the run's history for its spans; the run has none", "workflow", wid, "err", err)
			return nil
		}
		hist = append(hist, e)
	}
	b.checkWallClock()
	return buildSpans(hist, tr, b.wall)
}

// checkWallClock warns once the wall clock has moved 1 ms or more from the
// monotonic clock since the backend was made: history times are converted
// with the offset of that moment, so the history's spans are off by that
// much against the worker's.
func (b *Backend) checkWallClock() {
	now := time.Now()
	d := now.Round(0).Sub(b.epoch.Round(0)) - now.Sub(b.epoch)
	if d < 0 {
		d = -d
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if int64(d) > b.wallDrift {
		if d >= time.Millisecond && b.wallDrift < int64(time.Millisecond) {
			b.log.Warn("the wall clock moved from the monotonic clock since the adapter started: history spans are off by it", "drift", d)
		}
		b.wallDrift = int64(d)
	}
}

// eventsSink is a sink that records several events at once
// (protocol.Server's Events).
type eventsSink interface {
	Events(run string, evs []protocol.Event)
}

// keepFinished is how many finished runs' states the backend keeps.
const keepFinished = 4096

// emit records ev for run (held back until run_started is recorded).
// Events of runs this adapter does not know are dropped.
func (b *Backend) emit(run string, ev protocol.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.runs[run]
	if st == nil {
		b.log.Info("event of an unknown run dropped", "run", run, "kind", ev.Kind)
		return
	}
	switch ev.Kind {
	case protocol.EventStepCompleted:
		k := stepKey{ev.Stage, ev.Index}
		if st.completed[k] {
			// A body that ended twice (a completion the server did not
			// take, then a retry): the protocol wants one completion.
			b.log.Warn("second completion of a step not reported", "run", run, "stage", ev.Stage, "index", ev.Index, "attempt", ev.Attempt)
			return
		}
		st.completed[k] = true
	case protocol.EventHookWaiting, protocol.EventHookReceived:
		k := ev.Kind + "/" + ev.Token
		if st.hookSeen[k] {
			return
		}
		st.hookSeen[k] = true
	}
	if !st.started {
		st.pending = append(st.pending, ev)
		return
	}
	b.sink.Event(run, ev)
}

// Resume signals the run's workflow. A resume id seen before is a no-op;
// the signal also carries the resume id as its request id, so the server
// itself drops a repeat.
func (b *Backend) Resume(ctx context.Context, run, token string, req protocol.ResumeRequest) error {
	b.mu.Lock()
	st := b.runs[run]
	if st == nil {
		b.mu.Unlock()
		return fmt.Errorf("no run %s", run)
	}
	if st.resumed[req.ResumeID] {
		b.mu.Unlock()
		return nil
	}
	if token != st.token {
		b.mu.Unlock()
		return fmt.Errorf("run %s has no hook %q (its hook is %q)", run, token, st.token)
	}
	wid, rid := st.workflowID, st.runID
	sent := b.now()
	b.mu.Unlock()
	payloads, err := converter.GetDefaultDataConverter().ToPayloads(req.Payload)
	if err != nil {
		return err
	}
	_, err = b.c.WorkflowService().SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
		Namespace:         b.cfg.Namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: rid},
		SignalName:        signalName,
		Input:             payloads,
		Identity:          "durabench",
		RequestId:         req.ResumeID,
	})
	if err != nil {
		return fmt.Errorf("resume %s of run %s: %w", token, run, err)
	}
	b.mu.Lock()
	st.resumed[req.ResumeID] = true
	if st.trace != nil {
		st.trace.resumes = append(st.trace.resumes, sent)
	}
	b.mu.Unlock()
	return nil
}

var _ protocol.Backend = (*Backend)(nil)
