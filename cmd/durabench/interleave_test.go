package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
)

// TestInterleave: sweep --interleave on the mem world (two versions, a
// fan-out of 8, 6 runs a side) writes one file whose two cells are
// partners, each run with its block and position; compare FILE compares
// its two sides pair by pair (the paired test, the interval, the MDE) in
// text and JSON; gate FILE gates the head side against the base side;
// report FILE has the paired section; and what cannot be paired is a
// usage error naming --interleave (exit 2).
func TestInterleave(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "il")
	r := durabench(t, dir, "sweep", "--world", "mem", "--scenario", "fanout", "--branches", "8", "--versions", "baseline,resilient",
		"--switches", "none", "--reps", "6", "--warmup", "1", "--interleave", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("sweep: exit %d\n%s", r.code, r.stderr)
	}
	path := filepath.Join(out, "results.json")
	f, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if in := f.Plan.Interleave; in == nil || in.Dimension != "versions" || in.A != "baseline" || in.B != "resilient" {
		t.Fatalf("interleave %+v", f.Plan.Interleave)
	}
	for _, c := range f.Cells {
		p := c.Pairing
		if p == nil || len(p.Runs) != 6 || p.Runs[5].Block != 6 {
			t.Fatalf("cell %s: pairing %+v", c.Version, p)
		}
	}

	r = durabench(t, dir, "compare", path)
	if r.code != 0 {
		t.Fatalf("compare FILE: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"base: version baseline", "head: version resilient", "paired: one interleaved sweep, versions baseline (base) against resilient (head)",
		"(paired p=", "n=6 pairs, MDE "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("compare FILE lacks %q:\n%s", want, r.stdout)
		}
	}
	r = durabench(t, dir, "compare", path, "--format", "json")
	if r.code != 0 {
		t.Fatalf("compare FILE --format json: exit %d\n%s", r.code, r.stderr)
	}
	var doc struct {
		Interleave *results.Interleave
		Rows       []struct {
			Metric string
			MDE    *float64 `json:"mde_pct"`
			Paired *struct {
				Test   string
				N      int      `json:"n_pairs"`
				Lo     *float64 `json:"ci_lo_pct"`
				Hi     *float64 `json:"ci_hi_pct"`
				Delta  *float64 `json:"delta_pct"`
				MDEPct *float64 `json:"mde_pct"`
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("compare json: %v\n%s", err, r.stdout)
	}
	if doc.Interleave == nil || doc.Interleave.Order != "random" {
		t.Errorf("json interleave %+v", doc.Interleave)
	}
	ttls := false
	for _, row := range doc.Rows {
		if row.Metric != "ttls" {
			continue
		}
		ttls = true
		p := row.Paired
		if p == nil || p.Test != "wilcoxon signed-rank" || p.N != 6 || p.Lo == nil || p.Hi == nil || p.Delta == nil ||
			!(*p.Lo <= *p.Delta && *p.Delta <= *p.Hi) || row.MDE == nil || p.MDEPct == nil || *row.MDE != *p.MDEPct {
			t.Errorf("ttls row: %+v paired %+v", row, p)
		}
	}
	if !ttls {
		t.Errorf("no ttls row:\n%s", r.stdout)
	}

	r = durabench(t, dir, "gate", path, "--rule", "ttls.p50 < 100x baseline", "--rule", "stalls == 0")
	if r.code != 0 || !strings.Contains(r.stdout, "paired Δ") || !strings.Contains(r.stdout, "pairs, MDE ") {
		t.Errorf("gate FILE: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = durabench(t, dir, "report", path, "--format", "md")
	if r.code != 0 || !strings.Contains(r.stdout, "**`resilient` against `baseline`, paired**") {
		t.Errorf("report FILE: exit %d\n%s", r.code, r.stdout)
	}

	// One file that is not interleaved: compare wants two.
	r = durabench(t, dir, "sweep", "--world", "mem", "--scenario", "fanout", "--branches", "8", "--versions", "resilient",
		"--switches", "none", "--reps", "2", "--warmup", "0", "--quiet", "--out", filepath.Join(dir, "plain"))
	if r.code != 0 {
		t.Fatalf("plain sweep: exit %d\n%s", r.code, r.stderr)
	}
	if r = durabench(t, dir, "compare", filepath.Join(dir, "plain", "results.json")); r.code != 2 || !strings.Contains(r.stderr, "not an interleaved sweep") {
		t.Errorf("compare of one plain file: exit %d\n%s", r.code, r.stderr)
	}
	r = durabench(t, dir, "sweep", "--world", "mem", "--branches", "8", "--versions", "baseline,resilient,runcontext", "--switches", "none", "--interleave", "--quiet")
	if r.code != 2 || !strings.Contains(r.stderr, "--interleave") {
		t.Errorf("three versions interleaved: exit %d\n%s", r.code, r.stderr)
	}
}
