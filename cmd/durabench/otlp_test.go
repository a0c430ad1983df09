package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durabench/durabench/reporters/traces"
	"github.com/durabench/durabench/results"
)

// TestReportOTLP: a sweep keeps its runs' timelines beside results.json;
// report --format otlp --runs writes the runs asked for as one OTLP/JSON
// document that reads back into the OpenTelemetry protobuf types, with
// --trace-dir one file per cell; a run the sweep did not keep is exit 2.
func TestReportOTLP(t *testing.T) {
	dir := t.TempDir()
	r := durabench(t, dir, append(smallSweep, "--quiet", "--out", "s", "--trace-dir", "tr")...)
	if r.code != 0 {
		t.Fatalf("sweep: exit %d, %s", r.code, r.stderr)
	}
	f, err := results.Read(filepath.Join(dir, "s", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tr", "*.otlp.jsonl"))
	if len(files) != len(f.Cells) {
		t.Errorf("%d trace files for %d cells", len(files), len(f.Cells))
	}
	// Two runs of the sweep's first cell.
	prefix := strings.TrimSuffix(firstRunID(t, dir), "-r0001")
	ids := []string{prefix + "-r0001", prefix + "-r0003"}
	r = durabench(t, dir, "report", "s/results.json", "--format", "otlp", "--runs", strings.Join(ids, ","))
	if r.code != 0 {
		t.Fatalf("report: exit %d, %s", r.code, r.stderr)
	}
	data, err := traces.ReadJSON(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, rs := range data.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if len(s.ParentSpanId) == 0 {
					roots = append(roots, s.Name)
				}
			}
		}
	}
	if strings.Join(roots, ",") != "run "+ids[0]+",run "+ids[1] {
		t.Errorf("root spans %q, want the runs %q", roots, ids)
	}
	r = durabench(t, dir, "report", "s/results.json", "--format", "otlp", "--runs", "nope-r0001")
	if r.code != 2 || !strings.Contains(r.stderr, "nope-r0001") {
		t.Errorf("unknown run: exit %d, %q", r.code, r.stderr)
	}
	r = durabench(t, dir, "report", "s/results.json", "--runs", ids[0], "--format", "md")
	if r.code != 2 || !strings.Contains(r.stderr, "--runs goes with --format text") {
		t.Errorf("--runs with md: exit %d, %q", r.code, r.stderr)
	}
	// Without a format, each run's critical path as a waterfall: a line a
	// segment, as many as the header counts.
	r = durabench(t, dir, "report", "s/results.json", "--runs", strings.Join(ids, ","))
	if r.code != 0 {
		t.Fatalf("report --runs: exit %d, %s", r.code, r.stderr)
	}
	for _, id := range ids {
		i := strings.Index(r.stdout, "run "+id+" · ")
		if i < 0 {
			t.Fatalf("no waterfall of %s:\n%s", id, r.stdout)
		}
		block := strings.SplitN(r.stdout[i:], "\n\n", 2)[0]
		var n int
		if _, err := fmt.Sscanf(block[strings.Index(block, ", ")+2:], "%d segments", &n); err != nil || n == 0 {
			t.Fatalf("%s: no segment count in %q", id, strings.SplitN(block, "\n", 2)[0])
		}
		lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
		if len(lines) != n+3 || !strings.HasPrefix(lines[len(lines)-1], "  by category: ") {
			t.Errorf("%s: %d lines for %d segments:\n%s", id, len(lines), n, block)
		}
	}
}

// firstRunID reads the first run id of the first cell from the sweep's
// timelines.
func firstRunID(t *testing.T, dir string) string {
	t.Helper()
	cells, err := traces.ReadStore(filepath.Join(dir, "s", traces.StoreName), nil)
	if err != nil || len(cells) == 0 || len(cells[0].Runs) == 0 {
		t.Fatalf("timelines: %v, %d cells", err, len(cells))
	}
	if _, err := os.Stat(filepath.Join(dir, "s", traces.StoreName)); err != nil {
		t.Fatal(err)
	}
	return cells[0].Runs[0].ID
}
