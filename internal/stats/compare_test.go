package stats

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// synthCell is a fan-out cell on the sim world whose TTFS and TTLS are
// drawn from seeded lognormal models.
type synthCell struct {
	branches int
	version  string
	ttfsUS   float64 // median TTFS
	ttlsUS   float64 // median TTLS
}

// synthMatrix is a small fan-out matrix with TTLS growing with branches
// (the shape of the reference sweeps).
var synthMatrix = []synthCell{
	{20, "baseline", 30000, 400000}, {64, "baseline", 35000, 1425000}, {256, "baseline", 45000, 5000000},
	{20, "resilient", 28000, 350000}, {64, "resilient", 30000, 1054000}, {256, "resilient", 40000, 4000000},
}

// synthFile draws a sweep of the matrix: runs per cell, log-space noise
// sigma, every latency scaled by factor.
func synthFile(seed uint64, runs int, sigma, factor float64, cells []synthCell) *results.File {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	f := &results.File{
		Schema: results.Schema, Methodology: results.Methodology, DurabenchVersion: "0.1.0-test",
		GitCommit: "0123456789abcdef0123", StartedAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC),
		VirtualTime: true,
	}
	for _, c := range cells {
		f.Cells = append(f.Cells, results.Cell{
			Scenario: "fanout", Branches: c.branches, Version: c.version,
			World: "sim", Profile: "cloud", Runs: runs,
			Metrics: map[string]results.Metric{
				"ttfs": synthMetric(lognormal(rng, runs, c.ttfsUS, sigma, factor)),
				"ttls": synthMetric(lognormal(rng, runs, c.ttlsUS, sigma, factor)),
			},
		})
	}
	return f
}

func TestCellKey(t *testing.T) {
	a := KeyOf(&results.Cell{Scenario: "fanout", Branches: 256, Version: "resilient", Switches: []string{"lazy-hook-resume=0", "resilient-step-dispatch=0"}, World: "nats", Profile: "none"})
	b := KeyOf(&results.Cell{Scenario: "fanout", Branches: 256, Version: "resilient", Switches: []string{"resilient-step-dispatch=0+lazy-hook-resume=0"}, World: "nats", Profile: "none"})
	if a != b {
		t.Errorf("switch spellings key differently: %v vs %v", a, b)
	}
	if got, want := a.String(), "fanout/branches=256/version=resilient/switches=lazy-hook-resume=0+resilient-step-dispatch=0/world=nats/profile=none"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	none := KeyOf(&results.Cell{Scenario: "sequential", Steps: 50, Options: map[string]string{"b": "2", "a": "1"}, Version: "v", Switches: []string{"none"}, World: "mem", Profile: "lan"})
	if got, want := none.String(), "sequential/steps=50/options=a=1,b=2/version=v/switches=none/world=mem/profile=lan"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestCompare(t *testing.T) {
	base := synthFile(1, 30, 0.05, 1, synthMatrix)
	head := synthFile(2, 30, 0.05, 1, synthMatrix)
	// Head: resilient at 256 branches 20% slower; one cell only in head,
	// one only in base.
	slow := synthFile(3, 30, 0.05, 1.2, synthMatrix[5:6])
	head.Cells[5] = slow.Cells[0]
	head.Cells[5].Stalls = 2
	head.Cells = append(head.Cells, synthFile(4, 30, 0.05, 1, []synthCell{{1024, "resilient", 50000, 20000000}}).Cells...)
	base.Cells = append(base.Cells, synthFile(5, 30, 0.05, 1, []synthCell{{8, "baseline", 20000, 100000}}).Cells...)

	base.Plan.Pace, head.Plan.Pace = "burst", "open"
	c, err := Compare(base, head, CompareOptions{BaseLabel: "base.json", HeadLabel: "head.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OnlyHead) != 1 || c.OnlyHead[0].Branches != 1024 {
		t.Errorf("OnlyHead = %v, want the 1024-branch cell", c.OnlyHead)
	}
	if len(c.OnlyBase) != 1 || c.OnlyBase[0].Branches != 8 {
		t.Errorf("OnlyBase = %v, want the 8-branch cell", c.OnlyBase)
	}
	if len(c.Metrics) != 2 || c.Metrics[0].Metric != "ttfs" || c.Metrics[1].Metric != "ttls" {
		t.Fatalf("metrics = %+v, want ttfs then ttls", c.Metrics)
	}
	if n := len(c.Counts); n != 8 {
		t.Errorf("%d count rows, want 8 (6 shared + 1 per one-sided cell)", n)
	}
	for _, m := range c.Metrics {
		if len(m.Rows) != 8 {
			t.Errorf("%s: %d rows, want 8: one-sided cells are listed, not dropped", m.Metric, len(m.Rows))
		}
		if m.Geomean.Cells != 6 {
			t.Errorf("%s geomean over %d cells, want 6", m.Metric, m.Geomean.Cells)
		}
		for _, r := range m.Rows {
			moved := r.Cell.Branches == 256 && r.Cell.Version == "resilient"
			switch {
			case !r.InBase || !r.InHead:
				if r.Delta() != "" {
					t.Errorf("%s %s one-sided row has delta %q", m.Metric, r.Cell, r.Delta())
				}
			case moved:
				if !r.Test.Significant || r.DeltaPct < 15 || r.DeltaPct > 25 {
					t.Errorf("%s %s: delta %.1f%% p=%.3f, want ≈+20%% significant", m.Metric, r.Cell, r.DeltaPct, r.Test.P)
				}
			default:
				if r.DeltaPct > 5 || r.DeltaPct < -5 {
					t.Errorf("%s %s: delta %.1f%% on an unchanged cell", m.Metric, r.Cell, r.DeltaPct)
				}
			}
		}
	}
	if got := len(c.Changed()); got < 2 {
		t.Errorf("Changed() = %d rows, want at least the two moved metrics", got)
	}

	var text, md bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("text:\n%s", text.String())
	t.Logf("markdown:\n%s", md.String())
	if !slices.Equal(c.Warnings, []string{"pace differs: base burst, head open"}) {
		t.Errorf("Warnings = %q", c.Warnings)
	}
	for _, want := range []string{"all cells: scenario=fanout switches=none world=sim profile=cloud", "warning: pace differs: base burst, head open", "geomean", "~", "(p=0.000 n=30 runs, MDE ",
		"only in head.json (1 cells, not compared):", "fanout/branches=1024/version=resilient", "(head only)", "(base only)", "median ± 95% CI"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	for _, want := range []string{"#### ttls", "| cell | base.json | head.json | Δ | p | n | MDE |", "**geomean**", "**0 → 2**", "only in base.json"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown output lacks %q", want)
		}
	}
}

func TestCompareIdentical(t *testing.T) {
	f := synthFile(7, 20, 0.1, 1, synthMatrix)
	c, err := Compare(f, f, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Metrics {
		for _, r := range m.Rows {
			if r.Test.Significant || r.Delta() != "~" || r.DeltaPct != 0 {
				t.Errorf("%s %s: %+v, want ~", m.Metric, r.Cell, r)
			}
		}
		if m.Geomean.DeltaPct != 0 {
			t.Errorf("%s geomean delta %v, want 0", m.Metric, m.Geomean.DeltaPct)
		}
	}
	if c.Base.Label != "0123456789ab" {
		t.Errorf("default label %q, want the short commit", c.Base.Label)
	}
}

func TestCompareMethodologyMismatch(t *testing.T) {
	base := synthFile(1, 10, 0.1, 1, synthMatrix)
	head := synthFile(2, 10, 0.1, 1, synthMatrix)
	head.Methodology = results.Methodology + 1
	if _, err := Compare(base, head, CompareOptions{}); !errors.Is(err, ErrMethodology) {
		t.Errorf("Compare across methodologies: err = %v, want ErrMethodology", err)
	}
	if _, err := Gate(head, base, DefaultRules()); !errors.Is(err, ErrMethodology) || !errors.Is(err, results.ErrInvalid) {
		t.Errorf("Gate across methodologies: err = %v, want ErrMethodology (an ErrInvalid)", err)
	}
}

func TestCompareMetricsFilter(t *testing.T) {
	f := synthFile(1, 10, 0.1, 1, synthMatrix)
	c, err := Compare(f, f, CompareOptions{Metrics: []string{"ttls"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Metrics) != 1 || c.Metrics[0].Metric != "ttls" {
		t.Errorf("metrics = %v, want only ttls", c.Metrics)
	}
}

// BenchmarkCompare compares two sweeps of the 6-cell matrix with 30 runs a
// cell (two metrics each).
func BenchmarkCompare(b *testing.B) {
	base := synthFile(1, 30, 0.15, 1, synthMatrix)
	head := synthFile(2, 30, 0.15, 1.05, synthMatrix)
	for b.Loop() {
		if _, err := Compare(base, head, CompareOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
