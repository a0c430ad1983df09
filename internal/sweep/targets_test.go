package sweep

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// steppingClock is the reference engine with a clock that steps by step
// (with every timestamp after it) once its after-th run starts.
type steppingClock struct {
	*reference.Reference
	step    time.Duration
	after   int32
	starts  atomic.Int32
	stepped atomic.Bool
}

func (s *steppingClock) Now() time.Duration {
	if s.stepped.Load() {
		return s.Reference.Now() + s.step
	}
	return s.Reference.Now()
}

func (s *steppingClock) Start(ctx context.Context, req protocol.StartRequest) error {
	if s.starts.Add(1) == s.after {
		s.stepped.Store(true)
	}
	return s.Reference.Start(ctx, req)
}

func (s *steppingClock) Open(ctx context.Context, sink protocol.Sink) error {
	return s.Reference.Open(ctx, steppedSink{sink, s})
}

type steppedSink struct {
	protocol.Sink
	s *steppingClock
}

func (k steppedSink) Event(run string, ev protocol.Event) {
	if k.s.stepped.Load() {
		ev.At += int64(k.s.step)
	}
	k.Sink.Event(run, ev)
}

// TestTargetClockStepsMidCell: a target whose clock steps +500 ms in the
// middle of a cell — after the cell's first clock sample — is caught by the
// sample at the cell's end: results.json records the drift and report.md
// flags the cell; the header names the target's world, not durabench's.
func TestTargetClockStepsMidCell(t *testing.T) {
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		t.Fatal(err)
	}
	b := &steppingClock{Reference: reference.New(mem.New(world.Options{}), v), step: 500 * time.Millisecond, after: 6}
	srv, err := protocol.NewServer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		_ = srv.Close(context.Background())
	}()
	res := sweepSteps(t, hs.URL, 10, t.TempDir())
	c := res.File.Cells[0]
	if c.ClockDriftUS < 490_000 || c.ClockDriftUS > 510_000 || c.TargetWorld != "mem" {
		t.Fatalf("clock drift %.0f µs, target world %q; want about +500 ms on mem", c.ClockDriftUS, c.TargetWorld)
	}
	rep, err := os.ReadFile(res.ReportPath)
	if os.Getenv("SHOW_REPORT") != "" {
		t.Logf("%s", rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The drift printed is the one measured, within the clock samples'
	// error of the +500 ms step (499.9ms is as right as 500.0ms).
	m := regexp.MustCompile(`drift \+([0-9.]+)ms`).FindStringSubmatch(string(rep))
	if !strings.Contains(string(rep), "**Target clock** in `") || m == nil {
		t.Fatalf("report.md does not flag the cell's clock:\n%s", rep)
	}
	if ms, _ := strconv.ParseFloat(m[1], 64); ms < 490 || ms > 510 {
		t.Errorf("report.md prints a drift of +%sms; want about +500ms", m[1])
	}
	header := strings.SplitN(string(rep), "\n\n", 3)[1]
	if !strings.Contains(header, "(world mem)") || strings.Contains(header, "world nats") || strings.Contains(header, "profile") {
		t.Errorf("report header %q: want the target's world, not durabench's", header)
	}
}

// sweepSteps sweeps reps closed-loop single-step runs, no warm-up, on the
// target at url, into out.
func sweepSteps(t *testing.T, url string, reps int, out string) *Outcome {
	t.Helper()
	plan, err := planFrom(t, "--targets", url, "--scenario", "step", "--reps", strconv.Itoa(reps), "--warmup", "0", "--pace", "closed")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Plan: plan, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// spansAsked is the reference engine, recording which scenarios' starts
// asked for span events.
type spansAsked struct {
	*reference.Reference
	mu    sync.Mutex
	asked map[string]bool
}

func (s *spansAsked) Start(ctx context.Context, req protocol.StartRequest) error {
	s.mu.Lock()
	s.asked[req.Scenario] = s.asked[req.Scenario] || req.Spans
	s.mu.Unlock()
	return s.Reference.Start(ctx, req)
}

// TestTargetCellsCarryCriticalPath: a sweep over the reference target asks
// for span events in a cell that reports TTLS or TTC, and its results.json
// cell carries critical_path, each run's categories adding up to its TTLS
// sample, and critical_path_ttc, adding up to its TTC; a stream cell (TTC,
// no TTLS) carries the latter only.
func TestTargetCellsCarryCriticalPath(t *testing.T) {
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		t.Fatal(err)
	}
	b := &spansAsked{Reference: reference.New(mem.New(world.Options{}), v), asked: map[string]bool{}}
	srv, err := protocol.NewServer(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		_ = srv.Close(context.Background())
	}()
	plan, err := planFrom(t, "--targets", hs.URL, "--scenario", "fanout,stream-sizes", "--branches", "16", "--reps", "3",
		"--warmup", "0", "--pace", "closed", "--option", "chunks=10", "--option", "interval=1ms")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Plan: plan, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range res.File.Cells {
		switch c.Scenario {
		case "fanout":
			seen++
			ttls := c.Metrics[metrics.TTLS].Values
			if len(c.CriticalPath) != metrics.NumCategories || len(ttls) != 3 {
				t.Fatalf("fanout cell: %d critical-path categories, %d TTLS values; want %d and 3", len(c.CriticalPath), len(ttls),
					metrics.NumCategories)
			}
			for r, want := range ttls {
				var sum int64
				for _, pc := range c.CriticalPath {
					sum += pc.Values[r]
				}
				if sum != want {
					t.Errorf("fanout run %d: categories add up to %d µs, TTLS %d µs", r, sum, want)
				}
			}
			sumsTo(t, "fanout", c.CompletionPath, c.Metrics[metrics.TTC].Values)
		case "stream-sizes":
			seen++
			if c.CriticalPath != nil {
				t.Errorf("stream-sizes cell: a critical path %v", c.CriticalPath)
			}
			sumsTo(t, "stream-sizes", c.CompletionPath, c.Metrics[metrics.TTC].Values)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if seen != 2 || !b.asked["fanout"] || !b.asked["stream-sizes"] {
		t.Fatalf("%d cells; spans asked for %v, want both (fanout reports TTLS and TTC, stream-sizes TTC)", seen, b.asked)
	}
}

// sumsTo checks a cell's path to completion: every category, a value per
// run, each run's adding up to its TTC sample (µs).
func sumsTo(t *testing.T, cell string, path []results.PathCategory, ttc []int64) {
	t.Helper()
	if len(path) != metrics.NumCategories || len(ttc) != 3 {
		t.Fatalf("%s cell: %d categories on the path to completion, %d TTC values; want %d and 3", cell, len(path), len(ttc),
			metrics.NumCategories)
	}
	for r, want := range ttc {
		var sum int64
		for _, pc := range path {
			sum += pc.Values[r]
		}
		if sum != want {
			t.Errorf("%s run %d: the path to completion adds up to %d µs, TTC %d µs", cell, r, sum, want)
		}
	}
}
