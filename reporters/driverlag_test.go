package reporters

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// openPacedFile is a single-step sweep paced open at 5,000 runs/s: one
// cell whose driver kept to its schedule (lag p99 2 µs against a TTFS p50
// of 60 µs) and one whose driver fell behind (lag p99 900 µs).
func openPacedFile() *results.File {
	f := &results.File{Schema: results.Schema, Methodology: results.Methodology, DurabenchVersion: "v0.1.0",
		StartedAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC),
		Host:      results.Host{CPUs: 2, OS: "linux", Go: "go1.26.8"},
		Plan: results.PlanRecord{Scenarios: []string{"step"}, Switches: []string{"none"}, Worlds: []string{"mem"},
			Profiles: []string{"none"}, Reps: 100, Pace: "open", Rate: 5000, CellTimeoutMS: 60_000}}
	for _, v := range []struct {
		version string
		lag     int64
	}{{"resilient", 2}, {"pending-count", 900}} {
		f.Plan.Versions = append(f.Plan.Versions, results.VersionSpec{Name: v.version, Features: map[string]any{}})
		ttfs, lag := make([]int64, 100), make([]int64, 100)
		for i := range ttfs {
			ttfs[i], lag[i] = 60+int64(i%5), 1
		}
		lag[98], lag[99] = v.lag, v.lag
		lm := metricOf(lag)
		f.Cells = append(f.Cells, results.Cell{Scenario: "step", Version: v.version, Switches: []string{}, World: "mem",
			Profile: "none", Runs: 100, Metrics: map[string]results.Metric{"ttfs": metricOf(ttfs), "ttc": metricOf(ttfs)},
			DriverLag: &lm})
	}
	return f
}

// TestDriverLagInReports: an open-paced cell's driver lag stands next to
// its TTFS in the text and markdown reports, and only the cell whose lag
// p99 is over DriverLagShare of its TTFS p50 is warned about.
func TestDriverLagInReports(t *testing.T) {
	f := openPacedFile()
	var txt, md bytes.Buffer
	if err := Text(&txt, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, f, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("text:\n%s", txt.String())
	for _, out := range []string{txt.String(), md.String()} {
		if n := strings.Count(out, "driver lag p99 900.0µs is over 10% of TTFS p50 62.00µs"); n != 1 {
			t.Errorf("%d warnings about the lagging cell, want 1:\n%s", n, out)
		}
		if strings.Count(out, ": driver lag p99 ") != 1 {
			t.Errorf("the cell that kept its schedule is warned about:\n%s", out)
		}
	}
	// The warning says how busy durabench and the target kept the cores,
	// when the cell recorded it.
	tc := 1.06
	f.Cells[1].CPU = &results.CellCPU{DurabenchCores: 0.58, TargetCores: &tc}
	var busy bytes.Buffer
	if err := Text(&busy, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(busy.String(), "set the tail (durabench kept 0.58 cores busy, the target 1.06)") {
		t.Errorf("the warning does not say how busy the cores were:\n%s", busy.String())
	}
	// And, when recorded, what the host took from the vCPUs.
	sc := 0.31
	f.Cells[1].CPU.StealCores = &sc
	busy.Reset()
	if err := Text(&busy, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(busy.String(), "set the tail (durabench kept 0.58 cores busy, the target 1.06; the host took 0.31 (steal))") {
		t.Errorf("the warning does not say what the host took:\n%s", busy.String())
	}
	f.Cells[1].CPU = nil
	if !strings.Contains(txt.String(), "TTFS p50      p99  lag p50      p99") {
		t.Errorf("text report: no lag columns after TTFS:\n%s", txt.String())
	}
	// A target's cells: the engines table has the lag p99 after TTFS p99.
	f.Cells[1].Target, f.Cells[1].Engine, f.Cells[1].EngineVersion = "goworkflows", "go-workflows", "v1.2.0"
	var eng bytes.Buffer
	if err := Markdown(&eng, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(eng.String(), "| TTFS p50 | TTFS p99 | driver lag p99 | TTLS p50 |") ||
		!strings.Contains(eng.String(), "| 62.00µs | 64.00µs | 900.0µs | - |") {
		t.Errorf("engines table: no driver lag p99 after TTFS p99:\n%s", eng.String())
	}
	ttfs, lag := strings.Index(md.String(), "| **TTFS** |"), strings.Index(md.String(), "| **driver lag** |")
	if ttfs < 0 || lag < ttfs || strings.Count(md.String()[ttfs:lag], "| **") > 1 {
		t.Errorf("markdown report: driver lag rows do not follow TTFS:\n%s", md.String())
	}
}
