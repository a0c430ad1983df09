package stats

import (
	"strings"
	"testing"
)

// TestSelectEngine: one file holding the built-in engine's two versions and
// a target compares engine against engine cell by cell — the target's
// cells against reference/resilient's, matched by scenario and size — and
// an ambiguous or unknown engine is an error naming what the file has.
func TestSelectEngine(t *testing.T) {
	f := synthFile(1, 30, 0.05, 1, synthMatrix)
	tgt := synthFile(2, 30, 0.05, 1.5, synthMatrix[3:6]) // resilient's sizes, 1.5x slower
	for _, c := range tgt.Cells {
		c.Target, c.Version, c.World, c.Profile, c.Engine = "slowengine", "", "", "none", "slow"
		f.Cells = append(f.Cells, c)
	}
	base, err := SelectEngine(f, "reference/resilient")
	if err != nil {
		t.Fatal(err)
	}
	head, err := SelectEngine(f, "slowengine")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(base, head, CompareOptions{BaseLabel: "reference/resilient", HeadLabel: "slowengine"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OnlyBase)+len(c.OnlyHead) != 0 {
		t.Fatalf("unmatched cells: base %v, head %v", c.OnlyBase, c.OnlyHead)
	}
	var ttls *MetricComparison
	for i := range c.Metrics {
		if c.Metrics[i].Metric == "ttls" {
			ttls = &c.Metrics[i]
		}
	}
	if ttls == nil || len(ttls.Rows) != 3 {
		t.Fatalf("ttls rows: %+v", ttls)
	}
	for _, r := range ttls.Rows {
		if !r.InBase || !r.InHead || !r.Test.Significant || r.DeltaPct < 30 {
			t.Errorf("%s: in base %v, in head %v, significant %v, delta %.1f%%; want a significant ~+50%%",
				r.Cell, r.InBase, r.InHead, r.Test.Significant, r.DeltaPct)
		}
		if s := r.Cell.String(); strings.Contains(s, "version") || strings.Contains(s, "target") {
			t.Errorf("key %q names an engine", s)
		}
	}
	if _, err := SelectEngine(f, "reference"); err == nil || !strings.Contains(err.Error(), "two cells") {
		t.Errorf("reference with two versions: %v", err)
	}
	if _, err := SelectEngine(f, "nosuch"); err == nil || !strings.Contains(err.Error(), "reference/baseline, reference/resilient, slowengine") {
		t.Errorf("unknown engine: %v", err)
	}
}

// A target that labels its own cells (the workflow adapter's label carries
// its SDK build's content hash, unknown before the sweep) is selected by
// its label or by the spec the plan gave it.
func TestSelectEngineBySpec(t *testing.T) {
	f := synthFile(1, 5, 0.05, 1, synthMatrix[3:6])
	for i := range f.Cells {
		f.Cells[i].Target, f.Cells[i].TargetSpec, f.Cells[i].Version, f.Cells[i].World = "workflow 4.8.9+1f0c2a9e4b7d · local", "workflow --sdk=head-tgz", "", ""
	}
	for _, e := range []string{"workflow --sdk=head-tgz", "workflow 4.8.9+1f0c2a9e4b7d · local"} {
		s, err := SelectEngine(f, e)
		if err != nil || len(s.Cells) != 3 {
			t.Errorf("SelectEngine(%q): %v", e, err)
		}
	}
	if _, err := SelectEngine(f, "workflow --sdk=base-tgz"); err == nil {
		t.Error("another spec selected cells")
	}
	if got, want := EngineTitle(f, "workflow --sdk=head-tgz"), "workflow --sdk=head-tgz (workflow 4.8.9+1f0c2a9e4b7d · local)"; got != want {
		t.Errorf("EngineTitle by spec: %q, want %q", got, want)
	}
	if got := EngineTitle(f, "workflow 4.8.9+1f0c2a9e4b7d · local"); got != "workflow 4.8.9+1f0c2a9e4b7d · local" {
		t.Errorf("EngineTitle by label: %q", got)
	}
}
