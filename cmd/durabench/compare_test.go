package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareByRun: two sim sweeps of the same sequential cell (40 steps,
// 8 runs, seeds 1 and 2) compared as JSON: every STSO row is tested on 8
// runs a side, on the per-run mean, and is not called a change; --null
// adds the null Δ; gate --null --format json carries the null ratio.
func TestCompareByRun(t *testing.T) {
	dir := t.TempDir()
	sweep := func(seed, name string) string {
		out := filepath.Join(dir, name)
		r := durabench(t, dir, "sweep", "--world", "sim", "--profile", "lan", "--scenario", "sequential", "--option", "steps=40",
			"--versions", "resilient", "--switches", "none", "--reps", "8", "--seed", seed, "--quiet", "--out", out)
		if r.code != 0 {
			t.Fatalf("sweep seed %s: exit %d\n%s", seed, r.code, r.stderr)
		}
		return filepath.Join(out, "results.json")
	}
	a, b, c := sweep("1", "a"), sweep("2", "b"), sweep("3", "c")
	r := durabench(t, dir, "compare", a, b, "--null", c, "--format", "json")
	if r.code != 0 {
		t.Fatalf("compare --format json: exit %d\n%s", r.code, r.stderr)
	}
	var doc struct {
		Null *struct{ Label string }
		Rows []struct {
			Metric, Unit, Statistic, Verdict string
			NBase                            int      `json:"n_base"`
			NHead                            int      `json:"n_head"`
			P                                *float64 `json:"p"`
			Null                             *float64 `json:"null_delta_pct"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("compare json: %v\n%s", err, r.stdout)
	}
	if doc.Null == nil || doc.Null.Label != "null" {
		t.Errorf("null sweep %+v, want the label null", doc.Null)
	}
	stso := 0
	for _, row := range doc.Rows {
		if !strings.HasPrefix(row.Metric, "stso") {
			continue
		}
		stso++
		if row.NBase != 8 || row.NHead != 8 || row.Unit != "run" || row.Statistic != "run mean" || row.P == nil || row.Null == nil {
			t.Errorf("%s row: n=%d+%d unit %q statistic %q p %v null %v, want 8+8 runs on the run mean", row.Metric, row.NBase, row.NHead, row.Unit, row.Statistic, row.P, row.Null)
		}
	}
	if stso == 0 {
		t.Fatalf("no stso rows:\n%s", r.stdout)
	}
	r = durabench(t, dir, "compare", a, b)
	if r.code != 0 || !strings.Contains(r.stdout, "stso (run mean)") || !strings.Contains(r.stdout, "n=8 runs") {
		t.Errorf("compare text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = durabench(t, dir, "gate", b, "--baseline", a, "--null", c, "--rule", "stso.p50 < 1.5x baseline", "--format", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"null_ratio":`) || !strings.Contains(r.stdout, `"unit": "run"`) {
		t.Errorf("gate --null --format json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := durabench(t, dir, "compare", a, b, "--format", "yaml"); r.code != 2 || !strings.Contains(r.stderr, "--format yaml") {
		t.Errorf("compare --format yaml: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := durabench(t, dir, "gate", b, "--null", c, "--rule", "errors == 0"); r.code != 2 || !strings.Contains(r.stderr, "--null") {
		t.Errorf("gate --null without --baseline: exit %d, stderr %q", r.code, r.stderr)
	}
	// An error of the repeated-head gate (here: no baseline for the null
	// sweep) is the gate's answer: --again's inner err once shadowed it,
	// and the gate panicked on the report it never got.
	if r := durabench(t, dir, "gate", b, "--null", c, "--again", b, "--rule", "errors == 0"); r.code != 2 || !strings.Contains(r.stderr, "--null") {
		t.Errorf("gate --again without --baseline: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCompareMetricsFlag: compare --metrics keeps the metrics named —
// critical_path_ttc every category of the path to completion, left out
// without it — and an unknown name is exit 2, naming the flag.
func TestCompareMetricsFlag(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "s")
	r := durabench(t, dir, "sweep", "--world", "sim", "--profile", "cloud", "--branches", "20", "--versions", "baseline",
		"--switches", "none", "--reps", "5", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("sweep: exit %d\n%s", r.code, r.stderr)
	}
	f := filepath.Join(out, "results.json")
	metricsOf := func(args ...string) []string {
		t.Helper()
		r := durabench(t, dir, append([]string{"compare", f, f, "--format", "json"}, args...)...)
		if r.code != 0 {
			t.Fatalf("compare %v: exit %d\n%s", args, r.code, r.stderr)
		}
		var doc struct{ Rows []struct{ Metric string } }
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, row := range doc.Rows {
			names = append(names, row.Metric)
		}
		return names
	}
	for _, m := range metricsOf() {
		if strings.HasPrefix(m, "critical_path_ttc.") {
			t.Errorf("compare lists %s unasked", m)
		}
	}
	got := metricsOf("--metrics", "ttc,critical_path_ttc")
	ttc, cats := 0, 0
	for _, m := range got {
		switch {
		case m == "ttc":
			ttc++
		case strings.HasPrefix(m, "critical_path_ttc."):
			cats++
		default:
			t.Errorf("--metrics ttc,critical_path_ttc: a %s row", m)
		}
	}
	if ttc == 0 || cats == 0 {
		t.Errorf("--metrics ttc,critical_path_ttc: %v", got)
	}
	r = durabench(t, dir, "compare", f, f, "--metrics", "ttc,critical_path_ttc.waiting")
	if r.code != 2 || !strings.Contains(r.stderr, `--metrics: unknown metric "critical_path_ttc.waiting"`) {
		t.Errorf("unknown metric: exit %d, %q", r.code, r.stderr)
	}
}
