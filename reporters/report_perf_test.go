package reporters_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/results"
)

// perfVersions × perfBranches cells of perfRunsPerCell runs: a 10,000-run
// results file.
var (
	perfVersions    = []string{"baseline", "resilient", "resilient-inband", "runcontext", "pending-count"}
	perfBranches    = []int{20, 64}
	perfRunsPerCell = 1000
)

// perfTimelines builds the finished fan-out timelines of one cell, with
// deterministic, varied times.
func perfTimelines(runs, branches, salt int) []metrics.RunTimeline {
	tls := make([]metrics.RunTimeline, runs)
	for i := range tls {
		t0 := time.Duration(i) * time.Millisecond
		steps := make([]engine.StepSpan, branches)
		var last time.Duration
		for j := range steps {
			start := t0 + time.Duration(100+(i*7+j*13+salt)%(5*branches))*time.Microsecond
			end := start + time.Duration(20+(i+j+salt)%30)*time.Microsecond
			steps[j] = engine.StepSpan{Index: j, Seq: j, Start: start, End: end, Attempt: 1}
			last = max(last, end)
		}
		tls[i] = metrics.RunTimeline{ID: fmt.Sprintf("fanout-%d-r%04d", branches, i), T0: t0, Finished: true,
			Done: last + 50*time.Microsecond, Steps: steps}
	}
	return tls
}

type perfCell struct {
	id  results.Cell
	tls []metrics.RunTimeline
}

func perfCells() []perfCell {
	var out []perfCell
	for bi, b := range perfBranches {
		for vi, v := range perfVersions {
			out = append(out, perfCell{
				id:  results.Cell{Scenario: "fanout", Branches: b, Version: v, World: "mem", Profile: "none"},
				tls: perfTimelines(perfRunsPerCell, b, bi*31+vi*7),
			})
		}
	}
	return out
}

// extract is metrics extraction: every cell's timelines to a results cell.
func extract(cells []perfCell) *results.File {
	f := &results.File{
		Schema: results.Schema, Methodology: results.Methodology, DurabenchVersion: "bench",
		StartedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), FinishedAt: time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC),
		Host: results.Host{CPUs: 2, OS: "linux", Arch: "amd64", Go: "go1.26"},
		Plan: results.PlanRecord{
			Scenarios: []string{"fanout"}, Branches: perfBranches, Switches: []string{"none"},
			Worlds: []string{"mem"}, Profiles: []string{"none"}, Reps: perfRunsPerCell, Pace: "burst",
			CellTimeoutMS: 600_000, Seed: 1,
			WorldOptions: results.WorldOptions{RetryStyle: "redeliver", VisibilityTimeoutMS: 30_000},
		},
	}
	for _, v := range perfVersions {
		f.Plan.Versions = append(f.Plan.Versions, results.VersionSpec{Name: v, Features: map[string]any{}})
	}
	for _, c := range cells {
		f.Cells = append(f.Cells, results.BuildCell(c.id, c.tls, results.BuildOptions{Elapsed: time.Second}))
	}
	return f
}

var perfNow = func() time.Time { return time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC) }

// BenchmarkPerfReport10k is the path from a finished 10,000-run sweep to
// its reports: metrics extraction (results.BuildCell per cell), the results
// file round trip (JSON encode, results.Decode with its validation), and
// rendering (reporters.Markdown and reporters.Text). Each stage is a
// sub-benchmark; "all" is the whole path (target: under 1 s).
func BenchmarkPerfReport10k(b *testing.B) {
	cells := perfCells()
	f := extract(cells)
	data, err := json.Marshal(f)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := results.Decode("bench.json", data); err != nil {
		b.Fatal(err)
	}
	opt := reporters.Options{Now: perfNow}
	b.Run("extract", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			extract(cells)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := results.Decode("bench.json", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("markdown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := reporters.Markdown(io.Discard, f, opt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := reporters.Text(io.Discard, f, opt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			g := extract(cells)
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(g); err != nil {
				b.Fatal(err)
			}
			h, err := results.Decode("bench.json", buf.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			if err := reporters.Markdown(io.Discard, h, opt); err != nil {
				b.Fatal(err)
			}
			if err := reporters.Text(io.Discard, h, opt); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf.Bytes()))/1e6, "file-MB")
	})
}
