package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/check"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// The tests run real DBOS on real PostgreSQL servers started with pgserver;
// without the server binaries they are skipped (with the install hint).
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := pgserver.FindBinaries(); err != nil {
		t.Skip(err)
	}
}

// serveInProcess serves a backend with cfg over httptest.
func serveInProcess(t *testing.T, cfg Config) (*Backend, *target.Client) {
	t.Helper()
	b := New(cfg)
	srv, err := protocol.NewServer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := target.NewClient(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// conform runs durabench's conformance checker against c and fails t with
// its report unless every check passes.
func conform(t *testing.T, c *target.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := check.Run(ctx, c, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_ = rep.Write(&out)
	if !rep.Passed() {
		t.Fatalf("target check failed:\n%s", out.String())
	}
	spansChecked(t, rep)
	if len(rep.Info.Scenarios) != len(supported) {
		t.Fatalf("checked %d scenarios, want %d:\n%s", len(rep.Info.Scenarios), len(supported), out.String())
	}
	t.Logf("\n%s", out.String())
}

// follow polls run's timeline to its end and returns its events.
func follow(t *testing.T, c *target.Client, run string, onEvent func(protocol.Event)) protocol.Timeline {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var all protocol.Timeline
	var after int64
	for {
		tl, err := c.Timeline(ctx, run, after, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		for _, ev := range tl.Events {
			if ev.Seq != after+1 {
				t.Fatalf("%s: seq %d after %d", run, ev.Seq, after)
			}
			after = ev.Seq
			if onEvent != nil {
				onEvent(ev)
			}
		}
		all.Events = append(all.Events, tl.Events...)
		if tl.Terminal() {
			all.Run, all.Status, all.Error = tl.Run, tl.Status, tl.Error
			return all
		}
	}
}

func TestInProcess(t *testing.T) {
	needPostgres(t)
	b, c := serveInProcess(t, Config{})

	t.Run("check", func(t *testing.T) { conform(t, c) })

	t.Run("fanout-256", func(t *testing.T) {
		const n = 256
		run := "t-fanout-256"
		if _, err := c.Start(context.Background(), protocol.StartRequest{Run: run, Scenario: "fanout",
			Options: map[string]string{"branches": fmt.Sprint(n)}}); err != nil {
			t.Fatal(err)
		}
		tl := follow(t, c, run, nil)
		if tl.Status != protocol.StatusCompleted {
			t.Fatalf("%s: %s %s", run, tl.Status, tl.Error)
		}
		started, completed := map[int]int{}, map[int]int{}
		for _, ev := range tl.Events {
			switch ev.Kind {
			case protocol.EventStepStarted:
				started[ev.Index]++
			case protocol.EventStepCompleted:
				completed[ev.Index]++
				if ev.Stage != 0 || ev.Attempt != 1 || ev.Source != protocol.SourceWorker || !ev.Inline {
					t.Errorf("step %d: stage %d attempt %d source %s inline %t", ev.Index, ev.Stage, ev.Attempt, ev.Source, ev.Inline)
				}
			case protocol.EventStepFailed, protocol.EventRunFailed:
				t.Errorf("%s: %+v", run, ev)
			}
		}
		for i := range n {
			if started[i] != 1 || completed[i] != 1 {
				t.Errorf("step 0.%d started %d times, completed %d times", i, started[i], completed[i])
			}
		}
		if len(started) != n || len(completed) != n {
			t.Errorf("%d steps started, %d completed, want %d", len(started), len(completed), n)
		}
		// DBOS's own record: one checkpoint per branch.
		steps, err := dbos.GetWorkflowSteps(b.dctx, run)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]int{}
		for _, s := range steps {
			names[s.StepName]++
		}
		for i := range n {
			if names[stepName(0, i)] != 1 {
				t.Errorf("DBOS recorded step %s %d times", stepName(0, i), names[stepName(0, i)])
			}
		}
	})

	t.Run("sequential-body", func(t *testing.T) {
		run := "t-seq-body"
		start := time.Now()
		if _, err := c.Start(context.Background(), protocol.StartRequest{Run: run, Scenario: "sequential",
			Options: map[string]string{"steps": "3", "body": "20ms"}}); err != nil {
			t.Fatal(err)
		}
		tl := follow(t, c, run, nil)
		if tl.Status != protocol.StatusCompleted {
			t.Fatalf("%s: %s %s", run, tl.Status, tl.Error)
		}
		var stages []int
		begun := map[int]int64{}
		for _, ev := range tl.Events {
			switch ev.Kind {
			case protocol.EventStepStarted:
				begun[ev.Stage] = ev.At
			case protocol.EventStepCompleted:
				stages = append(stages, ev.Stage)
				if d := time.Duration(ev.At - begun[ev.Stage]); d < 20*time.Millisecond {
					t.Errorf("step %d.0 body took %s, want >= 20ms", ev.Stage, d)
				}
			}
		}
		if fmt.Sprint(stages) != "[0 1 2]" {
			t.Errorf("steps completed in stages %v, want [0 1 2]", stages)
		}
		if time.Since(start) < 60*time.Millisecond {
			t.Errorf("3 steps of 20ms took %s", time.Since(start))
		}
	})

	t.Run("resume-idempotent", func(t *testing.T) {
		run := "t-hook-twice"
		if _, err := c.Start(context.Background(), protocol.StartRequest{Run: run, Scenario: "hook-step"}); err != nil {
			t.Fatal(err)
		}
		var hooks, received int
		tl := follow(t, c, run, func(ev protocol.Event) {
			switch ev.Kind {
			case protocol.EventHookWaiting:
				hooks++
				for range 3 { // the same resume id three times: one message
					if err := c.Resume(context.Background(), run, ev.Token,
						protocol.ResumeRequest{ResumeID: "drv/" + run + "/h0", Payload: []byte("ok")}); err != nil {
						t.Error(err)
					}
				}
			case protocol.EventHookReceived:
				received++
			}
		})
		if tl.Status != protocol.StatusCompleted || hooks != 1 || received != 1 {
			t.Fatalf("%s: %s %s, %d hooks, %d received", run, tl.Status, tl.Error, hooks, received)
		}
		conn, err := pgx.Connect(context.Background(), b.pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var msgs int
		if err := conn.QueryRow(context.Background(),
			`SELECT count(*) FROM dbos.notifications WHERE destination_uuid = $1`, run).Scan(&msgs); err != nil {
			t.Fatal(err)
		}
		if msgs != 1 {
			t.Errorf("DBOS holds %d messages for %s, want 1 (three resumes with one resume id)", msgs, run)
		}
	})

	t.Run("unsupported", func(t *testing.T) {
		for i, req := range []protocol.StartRequest{
			{Scenario: "stream"},
			{Scenario: "no-such-scenario"},
			{Scenario: "fanout", Options: map[string]string{"colour": "blue"}},
			{Scenario: "fanout", Options: map[string]string{"branches": "many"}},
			{Scenario: "fanout", Options: map[string]string{"branches": fmt.Sprint(DefaultMaxBranches + 1)}},
		} {
			req.Run = fmt.Sprintf("t-unsupported-%d", i)
			_, err := c.Start(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "422") {
				t.Errorf("%s %v: %v, want 422", req.Scenario, req.Options, err)
			}
		}
		if _, err := c.Start(context.Background(), protocol.StartRequest{Run: "t-fanout-256", Scenario: "step"}); err == nil ||
			!strings.Contains(err.Error(), "409") {
			t.Errorf("a repeated run id: %v, want 409", err)
		}
		// A run id DBOS knows but the protocol server does not (a reused
		// --pg-url server): the backend refuses it rather than returning
		// the old workflow.
		if err := b.Start(context.Background(), protocol.StartRequest{Run: "t-fanout-256", Scenario: "step"}); !errors.Is(err, dbos.ErrWorkflowIDInUse) {
			t.Errorf("a run id DBOS knows: %v, want ErrWorkflowIDInUse", err)
		}
	})
}

func TestWithPoolSize(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:5432/db?sslmode=disable":                    "postgres://u@h:5432/db?pool_max_conns=7&sslmode=disable",
		"postgresql://u@h/db?pool_max_conns=3":                      "postgresql://u@h/db?pool_max_conns=3",
		"host=h user=u dbname=db":                                   "host=h user=u dbname=db pool_max_conns=7",
		"host=h pool_max_conns=2":                                   "host=h pool_max_conns=2",
		"postgres://durabench@127.0.0.1:5/postgres?sslmode=disable": "postgres://durabench@127.0.0.1:5/postgres?pool_max_conns=7&sslmode=disable",
	} {
		if got, err := withPoolSize(in, 7); err != nil || got != want {
			t.Errorf("withPoolSize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

var (
	buildOnce sync.Once
	exePath   string
	buildErr  error
)

// executable builds the adapter once per test binary.
func executable(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "durabench-target-dbos-test-")
		if err != nil {
			buildErr = err
			return
		}
		exePath = filepath.Join(dir, protocol.ExecutablePrefix+"dbos")
		out, err := exec.Command("go", "build", "-o", exePath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return exePath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exePath != "" {
		os.RemoveAll(filepath.Dir(exePath))
	}
	os.Exit(code)
}

// pgDirRE finds the throwaway server's directory in the adapter's log.
var pgDirRE = regexp.MustCompile(`throwaway server in (\S+) on`)

// syncBuffer is a log buffer the adapter's output goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch starts the executable with args and returns it and its log.
func launch(t *testing.T, args ...string) (*target.Plugin, *syncBuffer) {
	t.Helper()
	exe := executable(t)
	var log syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), target.StartTimeout)
	defer cancel()
	p, err := target.Launch(ctx, "dbos", exe, args, &log)
	if err != nil {
		t.Fatal(err)
	}
	return p, &log
}

func TestExecutable(t *testing.T) {
	needPostgres(t)
	p, log := launch(t)
	stopped := false
	defer func() {
		if !stopped {
			_ = p.Stop()
		}
	}()
	if !strings.HasPrefix(p.URL, "http://127.0.0.1:") {
		t.Fatalf("URL %q", p.URL)
	}
	// Its stderr is copied on a goroutine of its own: the line may trail
	// the URL by a moment.
	var m []string
	for wait := time.Now().Add(5 * time.Second); m == nil && time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
		m = pgDirRE.FindStringSubmatch(log.String())
	}
	if m == nil {
		t.Fatalf("the adapter did not say where its PostgreSQL runs; its log:\n%s", log.String())
	}
	dir := m[1]
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("its PostgreSQL directory: %v", err)
	}
	c, err := target.NewClient(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	conform(t, c)
	stopped = true
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v (want exit 0); its log:\n%s", err, log.String())
	}
	// The guardian removes the directory once the adapter closed its pipe.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after the adapter stopped", dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPGURL(t *testing.T) {
	needPostgres(t)
	ctx := context.Background()
	pg, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	p, log := launch(t, "--pg-url", pg.URL(), "--pool", "12")
	c, err := target.NewClient(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	conform(t, c)
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v; its log:\n%s", err, log.String())
	}
	if pgDirRE.MatchString(log.String()) || !strings.Contains(log.String(), "pool 12 connections") {
		t.Errorf("with --pg-url the adapter should use that server with a pool of 12; its log:\n%s", log.String())
	}
	// DBOS wrote its system tables on the given server, which outlives the
	// adapter.
	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatalf("the test's server after the adapter stopped: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// 3 check runs per scenario, the 2 runs of the check of batch polls
	// (one per session), the run of the check of batch starts, the 2 of
	// the check of batch streams (one on the stream, one in another
	// session) and the run of the check of starts held until at (its
	// start 2 s ahead is refused).
	if want := 3*len(supported) + 6; n != want {
		// Which ones, and how they stand.
		var rows []string
		if rs, err := conn.Query(ctx, `SELECT workflow_uuid, status FROM dbos.workflow_status ORDER BY created_at`); err == nil {
			for rs.Next() {
				var id, status string
				if rs.Scan(&id, &status) == nil {
					rows = append(rows, id+" "+status)
				}
			}
			rs.Close()
		}
		t.Errorf("%d successful workflows on the server, want %d (3 check runs per scenario, 2 for batch polls, 1 for batch starts, 2 for batch streams, 1 for starts held until at); the workflows:\n%s",
			n, want, strings.Join(rows, "\n"))
	}
}

func TestBadFlags(t *testing.T) {
	exe := executable(t)
	err := exec.Command(exe, "--no-such-flag").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("a bad flag: %v, want exit 2", err)
	}
}

// spansChecked asserts that the checker validated span events (protocol
// 1.2) for every scenario: the "span events" row passed, not n/a.
func spansChecked(t *testing.T, rep check.Report) {
	t.Helper()
	n := 0
	for _, r := range rep.Results {
		if r.Check == "span events" {
			n++
			if !r.Pass {
				t.Errorf("%s: span events %s", r.Scenario, r.Reason)
			}
		}
	}
	if n == 0 || rep.Info.Minor < protocol.MinorSpans {
		t.Errorf("the checker checked no span events (protocol %s)", rep.Info.ProtocolString())
	}
}
