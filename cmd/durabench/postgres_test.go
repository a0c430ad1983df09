package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// needPostgres skips when no PostgreSQL binaries are installed — except on
// CI, which installs them (.ci/run): there their absence fails.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := pgserver.FindBinaries(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("skipped: %v", err)
	}
}

// TestPostgresSweep: every version's fan-outs run on a throwaway
// PostgreSQL server the sweep starts itself: no stall, no error, no world
// incident, nothing on stderr.
func TestPostgresSweep(t *testing.T) {
	needPostgres(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := durabench(t, dir, "sweep", "--world", "postgres", "--versions", "all", "--branches", "4,20",
		"--switches", "none", "--reps", "3", "--warmup", "1", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("sweep exit %d: %s", r.code, r.stderr)
	}
	if strings.TrimSpace(r.stderr) != "" {
		t.Errorf("stderr is not empty: %.500s", r.stderr)
	}
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) < 2 {
		t.Fatalf("%d cells", len(f.Cells))
	}
	if got := f.Plan.WorldOptions.PostgresFsync; got != "on" {
		t.Errorf("results record postgres_fsync %q, want on (what the throwaway server ran with)", got)
	}
	for _, c := range f.Cells {
		if c.World != "postgres" || c.Runs != 3 || c.Errors != 0 || c.Stalls != 0 || c.WorldIncidents != nil {
			t.Errorf("%s %s %d br: world %s runs %d errors %d stalls %d incidents %v", c.Scenario, c.Version, c.Branches,
				c.World, c.Runs, c.Errors, c.Stalls, c.WorldIncidents)
		}
	}
}

// TestPostgresDiesMidSweep: a PostgreSQL server that dies mid-sweep stops
// the sweep with exit 3, and every finished cell is kept in a partial
// results file.
func TestPostgresDiesMidSweep(t *testing.T) {
	needPostgres(t)
	srv, err := pgserver.Start(context.Background(), pgserver.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := startUntil(t, dir, "[1/5]", "sweep", "--world", "postgres", "--postgres-url", srv.URL(), "--branches", "4",
		"--switches", "none", "--reps", "5", "--warmup", "0", "--option", "body=30ms",
		"--cell-timeout", "5s", "--progress", "lines", "--out", out)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	code, stderr, _ := r.finish(t, 60*time.Second, "the sweep did not stop after the server died")
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr %q", code, stderr)
	}
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Partial || f.Error == "" || len(f.Cells) < 1 || len(f.Cells) >= 5 {
		t.Errorf("results: partial %v error %q with %d cells", f.Partial, f.Error, len(f.Cells))
	}
	if !strings.Contains(stderr, "kept in") {
		t.Errorf("stderr does not say where the finished cells are: %q", stderr)
	}
	t.Logf("stderr: %s", stderr)
}

// TestUnreachablePostgres: a URL where no server answers is one line
// naming the flag, exit 2, before anything runs.
func TestUnreachablePostgres(t *testing.T) {
	dir := t.TempDir()
	r := durabench(t, dir, "sweep", "--world", "postgres", "--postgres-url", "postgres://u:secret@127.0.0.1:1/db",
		"--branches", "4", "--versions", "baseline", "--reps", "1", "--out", filepath.Join(dir, "out"))
	if r.code != 2 {
		t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "postgres-url") ||
		strings.Contains(r.stderr, "secret") {
		t.Errorf("stderr %q: want one line naming --postgres-url, without the password", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "results.json")); err == nil {
		t.Error("results.json written for a sweep that never ran")
	}
}

// TestPostgresSDKSuite: the SDK suite's scenarios run on PostgreSQL with
// both dispatch paths: every cell completes with no error or stall and
// carries the metrics its scenario declares (a 1 MB payload, and 1 MB
// through the stream pipeline, included).
func TestPostgresSDKSuite(t *testing.T) {
	needPostgres(t)
	dir := t.TempDir()
	var cells []results.Cell
	for i, args := range [][]string{
		{"--scenario", "race,payload,stream-replay,stream-sizes", "--branches", "4", "--option", "steps=3",
			"--option", "size=1MB", "--option", "speed=8", "--option", "chunks=30", "--option", "interval=1ms"},
		{"--scenario", "stream-pipeline"},
	} {
		out := filepath.Join(dir, fmt.Sprint("out", i))
		args = append([]string{"sweep", "--world", "postgres", "--versions", "baseline,pending-count", "--switches", "none",
			"--reps", "2", "--warmup", "0", "--stall-threshold", "5s", "--quiet", "--out", out}, args...)
		r := durabench(t, dir, args...)
		if r.code != 0 {
			t.Fatalf("sweep exit %d: %s", r.code, r.stderr)
		}
		f, err := results.Read(filepath.Join(out, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, f.Cells...)
	}
	if len(cells) != 10 {
		t.Fatalf("%d cells, want 5 scenarios × 2 versions", len(cells))
	}
	for _, c := range cells {
		id := c.Scenario + "/" + c.Version
		if c.Runs != 2 || c.Errors != 0 || c.Stalls != 0 {
			t.Errorf("%s: runs %d errors %d stalls %d %v", id, c.Runs, c.Errors, c.Stalls, c.FailedRuns)
		}
		s, err := scenarios.Get(c.Scenario)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range s.Metrics {
			if _, ok := c.Metrics[name]; !ok {
				t.Errorf("%s: declared metric %s missing", id, name)
			}
		}
	}
}
