package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

const (
	// DefaultPool is the system-database pool size: DBOS's own default
	// (20 connections when the URL does not set pool_max_conns).
	DefaultPool = 20
	// DefaultMaxBranches is the largest fan-out declared in /v1/info: the
	// largest run by hand with every step exactly once (README; the tests
	// run 256).
	DefaultMaxBranches = 4096
	// appName is the DBOS application name (it names the workflows' owner).
	appName = "durabench"
	// workflowName is the one registered workflow: it interprets a
	// durabench program (engine.Program).
	workflowName = "durabench-program"
	// hookToken is the token of a hook-step run's one hook; it is also the
	// DBOS topic its Recv listens on and its Send writes to.
	hookToken = "hook-0"
	// hookTimeout bounds a Recv (a run whose hook is never resumed fails
	// then, instead of waiting forever).
	hookTimeout = 10 * time.Minute
	// shutdownTimeout bounds dbos.Shutdown.
	shutdownTimeout = 10 * time.Second
)

// supported are the scenarios of durabench's book the adapter runs.
var supported = []string{"fanout", "sequential", "hook-step", "step"}

// Config configures the backend.
type Config struct {
	// PGURL is a running PostgreSQL server; empty: start a throwaway one.
	PGURL string
	// Pool is the DBOS system-database pool size (pool_max_conns).
	Pool int
	// NoFsync turns fsync off on a throwaway server (pgserver.Options).
	NoFsync bool
	// MaxBranches is the fan-out limit declared in Info.
	MaxBranches int
	// Logger is DBOS's logger (nil: warnings and errors to stderr).
	Logger *slog.Logger
	// Log receives the adapter's own start-up lines (nil: none).
	Log io.Writer
}

// Backend is DBOS Transact Go served over the target protocol. Every run is
// one DBOS workflow (its workflow ID is durabench's run id) that interprets
// the scenario's program: a fan-out stage starts its steps with dbos.Go
// (RunAsStep in goroutines, with step IDs fixed before they start), a step
// chain calls dbos.RunAsStep one step after another, a hook is dbos.Recv on
// the hook's topic, resumed by dbos.Send with the resume id as its
// idempotency key.
type Backend struct {
	cfg   Config
	epoch time.Time

	pg   *pgserver.Server // nil with --pg-url
	dctx dbos.Context
	sink protocol.Sink

	mu   sync.Mutex
	runs map[string]*runState
}

// runState is what the adapter keeps of a run while it is live.
type runState struct {
	mu       sync.Mutex
	attempts map[[2]int]int // (stage, index) -> step bodies begun
	// trace is what the adapter measures for the run's spans (nil: its
	// start did not ask for them).
	trace *runTrace
}

// New returns the backend (started by Open).
func New(cfg Config) *Backend {
	if cfg.Pool <= 0 {
		cfg.Pool = DefaultPool
	}
	if cfg.MaxBranches <= 0 {
		cfg.MaxBranches = DefaultMaxBranches
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &Backend{cfg: cfg, epoch: time.Now(), runs: map[string]*runState{}}
}

// dbosVersion is the DBOS module version this binary was built with.
func dbosVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/dbos-inc/dbos-transact-golang" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "v1.8.0"
}

// Info names DBOS and the scenarios it runs.
func (b *Backend) Info() protocol.Info {
	// Minor 2: protocol 1.2, span events (spans.go).
	info := protocol.Info{Protocol: protocol.ProtocolVersion, Minor: 2, Engine: "dbos", Version: dbosVersion(),
		Clock: "monotonic ns since the adapter started"}
	for _, name := range supported {
		sc := protocol.Scenario{Name: name}
		if name == "fanout" {
			sc.Max = map[string]int{"branches": b.cfg.MaxBranches}
		}
		info.Scenarios = append(info.Scenarios, sc)
	}
	return info
}

// Now is the adapter's monotonic clock.
func (b *Backend) Now() time.Duration { return time.Since(b.epoch) }

func (b *Backend) at() int64 { return int64(b.Now()) }

// Open starts PostgreSQL (unless --pg-url) and DBOS.
func (b *Backend) Open(ctx context.Context, sink protocol.Sink) error {
	b.sink = sink
	dbURL := b.cfg.PGURL
	if dbURL == "" {
		pg, err := pgserver.Start(ctx, pgserver.Options{NoFsync: b.cfg.NoFsync})
		if err != nil {
			return err
		}
		b.pg = pg
		dbURL = pg.URL()
		b.logf("%s: throwaway server in %s on 127.0.0.1:%d (fsync %s)", pg.Version(), pg.Dir(), pg.Port(), onOff(!b.cfg.NoFsync))
	}
	dbURL, err := withPoolSize(dbURL, b.cfg.Pool)
	if err != nil {
		return err
	}
	// Not ctx: DBOS lives until Close, which shuts it down in order after
	// the HTTP server stopped (ctx ends at SIGTERM, before that).
	dctx, err := dbos.NewContext(context.Background(), dbos.Config{
		AppName:     appName,
		DatabaseURL: dbURL,
		Logger:      b.cfg.Logger,
		// An executor of its own per adapter process: Launch recovers the
		// pending workflows of its executor ID only, so a server reused with
		// --pg-url never hands this process another process's runs.
		ExecutorID: fmt.Sprintf("durabench-%d-%d", os.Getpid(), b.epoch.UnixNano()),
	})
	if err != nil {
		return fmt.Errorf("dbos: %w", err)
	}
	dbos.RegisterWorkflow(dctx, b.workflow, dbos.WithWorkflowName(workflowName))
	if err := dbos.Launch(dctx); err != nil {
		_ = dbos.Shutdown(dctx, shutdownTimeout)
		return fmt.Errorf("dbos launch: %w", err)
	}
	b.dctx = dctx
	b.logf("dbos %s launched (system database pool %d connections)", dbosVersion(), b.cfg.Pool)
	return nil
}

func (b *Backend) logf(format string, a ...any) {
	if b.cfg.Log != nil {
		fmt.Fprintf(b.cfg.Log, format+"\n", a...)
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// withPoolSize sets pool_max_conns on a PostgreSQL URL or key=value DSN
// (unless it sets one already).
func withPoolSize(dsn string, n int) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("--pg-url: %w", err)
		}
		q := u.Query()
		if !q.Has("pool_max_conns") {
			q.Set("pool_max_conns", strconv.Itoa(n))
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if strings.Contains(dsn, "pool_max_conns=") {
		return dsn, nil
	}
	return dsn + " pool_max_conns=" + strconv.Itoa(n), nil
}

// Input is a run's workflow input.
type Input struct {
	Run     string         `json:"run"`
	Program engine.Program `json:"program"`
}

// Start validates the scenario and starts its workflow; DBOS has written
// the workflow's status row (PENDING) when RunWorkflow returns.
func (b *Backend) Start(_ context.Context, req protocol.StartRequest) error {
	ok := false
	for _, name := range supported {
		ok = ok || name == req.Scenario
	}
	if !ok {
		return fmt.Errorf("%w: scenario %q (dbos runs %s)", protocol.ErrUnsupported, req.Scenario, strings.Join(supported, ", "))
	}
	sc, err := scenarios.Get(req.Scenario)
	if err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	p, _, err := sc.Build(scenarios.Values(req.Options))
	if err != nil {
		return fmt.Errorf("%w: %v", protocol.ErrUnsupported, err)
	}
	if p.Body.Jitter != 0 {
		return fmt.Errorf("%w: body jitter", protocol.ErrUnsupported)
	}
	if n := maxStage(p); n > b.cfg.MaxBranches {
		return fmt.Errorf("%w: %d parallel steps is over the limit %d", protocol.ErrUnsupported, n, b.cfg.MaxBranches)
	}
	b.mu.Lock()
	if _, dup := b.runs[req.Run]; dup {
		b.mu.Unlock()
		return fmt.Errorf("run %s is live", req.Run)
	}
	rs := &runState{attempts: map[[2]int]int{}}
	if req.Spans {
		rs.trace = newRunTrace(b.at())
	}
	b.runs[req.Run] = rs
	b.mu.Unlock()
	// Reject, not DBOS's default of returning the existing workflow: a run
	// id DBOS knows (a server reused with --pg-url, or a run the protocol
	// server forgot) would otherwise "complete" without running a step.
	h, err := dbos.RunWorkflow(b.dctx, b.workflow, Input{Run: req.Run, Program: p}, dbos.WithWorkflowID(req.Run),
		dbos.WithWorkflowIDReusePolicy(dbos.WorkflowIDReusePolicyReject))
	if err != nil {
		b.forget(req.Run)
		return fmt.Errorf("dbos: start workflow: %w", err)
	}
	go b.await(req.Run, h)
	return nil
}

func maxStage(p engine.Program) int {
	n := 0
	for _, st := range p.Stages {
		n = max(n, st.Steps)
	}
	return n
}

// await reports the run's end once DBOS recorded the workflow's outcome.
func (b *Backend) await(run string, h dbos.WorkflowHandle[string]) {
	_, err := h.GetResult()
	end := b.at()
	b.mu.Lock()
	rs := b.runs[run]
	b.mu.Unlock()
	// The run's spans, before its terminal event (which ends what
	// durabench follows of it).
	if rs != nil && rs.trace != nil {
		b.sendSpans(run, rs, end)
	}
	b.forget(run)
	if err != nil {
		b.sink.Event(run, protocol.Event{Kind: protocol.EventRunFailed, At: b.at(), Source: protocol.SourceSDK, Error: err.Error()})
		b.sink.Finished(run, true, err.Error())
		return
	}
	b.sink.Event(run, protocol.Event{Kind: protocol.EventRunCompleted, At: b.at(), Source: protocol.SourceSDK})
	b.sink.Finished(run, false, "")
}

func (b *Backend) forget(run string) {
	b.mu.Lock()
	delete(b.runs, run)
	b.mu.Unlock()
}

// attempt counts a step body's start (1 = first execution).
func (b *Backend) attempt(run string, stage, index int) int {
	b.mu.Lock()
	rs := b.runs[run]
	b.mu.Unlock()
	if rs == nil {
		return 1
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := [2]int{stage, index}
	rs.attempts[k]++
	return rs.attempts[k]
}

// workflow is the one DBOS workflow: it runs the program's stages in order.
func (b *Backend) workflow(ctx dbos.Context, in Input) (string, error) {
	started := b.at()
	b.sink.Event(in.Run, protocol.Event{Kind: protocol.EventRunStarted, At: started, Source: protocol.SourceWorker})
	b.note(in.Run, func(tr *runTrace) { tr.runStarted = started })
	for stage, st := range in.Program.Stages {
		switch st.Kind {
		case engine.StageHook:
			if err := b.hook(ctx, in.Run); err != nil {
				return "", err
			}
		case engine.StageSteps:
			if err := b.steps(ctx, in, stage, st.Steps); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("stage %d: kind %q is not supported", stage, st.Kind)
		}
	}
	return "done", nil
}

// hook waits for the hook's message (dbos.Recv on the hook's topic).
func (b *Backend) hook(ctx dbos.Context, run string) error {
	b.sink.Event(run, protocol.Event{Kind: protocol.EventHookWaiting, At: b.at(), Source: protocol.SourceWorker, Token: hookToken})
	if _, err := dbos.Recv[[]byte](ctx, hookToken, hookTimeout); err != nil {
		return fmt.Errorf("hook %s: %w", hookToken, err)
	}
	b.sink.Event(run, protocol.Event{Kind: protocol.EventHookReceived, At: b.at(), Source: protocol.SourceWorker, Token: hookToken})
	return nil
}

// steps runs one stage: a single step with RunAsStep, parallel steps with
// dbos.Go (each a RunAsStep in a goroutine of its own, step IDs assigned in
// order before any starts), awaited in order.
func (b *Backend) steps(ctx dbos.Context, in Input, stage, n int) error {
	if n == 1 {
		_, err := dbos.RunAsStep(ctx, b.body(in, stage, 0), dbos.WithStepName(stepName(stage, 0)))
		ret := b.at() // DBOS committed the step's output
		b.note(in.Run, func(tr *runTrace) { tr.returned[[2]int{stage, 0}] = ret })
		return err
	}
	chans := make([]<-chan dbos.StepOutcome[int], n)
	for i := range n {
		ch, err := dbos.Go(ctx, b.body(in, stage, i), dbos.WithStepName(stepName(stage, i)))
		if err != nil {
			return err
		}
		chans[i] = ch
	}
	var errs []error
	for _, ch := range chans {
		if out := <-ch; out.Err != nil {
			errs = append(errs, out.Err)
		}
	}
	return errors.Join(errs...)
}

func stepName(stage, index int) string { return fmt.Sprintf("step-%d.%d", stage, index) }

// body is a step's body: it reports its start and end (worker clock) and
// sleeps the program's fixed body time in between.
func (b *Backend) body(in Input, stage, index int) dbos.Step[int] {
	return func(ctx context.Context) (int, error) {
		// Inline: DBOS runs a step in the workflow's own process, in its
		// goroutine (RunAsStep) or one it spawned (dbos.Go); only workflows
		// go through queues.
		ev := protocol.Event{Kind: protocol.EventStepStarted, At: b.at(), Source: protocol.SourceWorker,
			Stage: stage, Index: index, Attempt: b.attempt(in.Run, stage, index), Inline: true}
		b.sink.Event(in.Run, ev)
		if d := in.Program.Body.Fixed; d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				ev.Kind, ev.At, ev.Error = protocol.EventStepFailed, b.at(), ctx.Err().Error()
				b.sink.Event(in.Run, ev)
				return 0, ctx.Err()
			}
		}
		start := ev.At
		ev.Kind, ev.At = protocol.EventStepCompleted, b.at()
		b.note(in.Run, func(tr *runTrace) { tr.bodies[[2]int{stage, index}] = interval{start, ev.At} })
		b.sink.Event(in.Run, ev)
		return index, nil
	}
}

// Resume sends the hook's message; the resume id is the send's idempotency
// key, so a repeated resume inserts nothing.
func (b *Backend) Resume(_ context.Context, run, token string, req protocol.ResumeRequest) error {
	if token != hookToken {
		return fmt.Errorf("run %s has no hook %q", run, token)
	}
	payload := req.Payload
	if payload == nil {
		payload = []byte{}
	}
	return dbos.Send(b.dctx, run, payload, token, dbos.WithIdempotencyKey(req.ResumeID))
}

// Close shuts DBOS down, then the throwaway PostgreSQL server (which
// removes its directory).
func (b *Backend) Close(context.Context) error {
	var errs []error
	if b.dctx != nil {
		errs = append(errs, dbos.Shutdown(b.dctx, shutdownTimeout))
		b.dctx = nil
	}
	if b.pg != nil {
		errs = append(errs, b.pg.Stop())
		b.pg = nil
	}
	return errors.Join(errs...)
}
