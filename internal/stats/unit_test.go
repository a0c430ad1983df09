package stats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// runsFile is one sequential cell whose STSO gaps share their run: each
// run draws its own level (lognormal, runSigma) and its gaps scatter
// tightly around it (gapSigma), as the gaps of one run share its backend,
// its cold start and its log length. Every level is scaled by factor.
func runsFile(seed uint64, runs, gaps int, runSigma, gapSigma, factor float64) *results.File {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	f := synthFile(seed, 0, 0, 1, nil)
	var s metrics.Samples
	var ttls []int64
	for range runs {
		level := factor * 2000 * math.Exp(runSigma*rng.NormFloat64())
		var total int64
		for range gaps {
			v := int64(math.Round(level * math.Exp(gapSigma*rng.NormFloat64())))
			s.Values = append(s.Values, v)
			total += v
		}
		s.RunEnds = append(s.RunEnds, len(s.Values))
		ttls = append(ttls, total)
	}
	stso := results.NewMetric(s.Values, 0)
	stso.PerRun, stso.PerRunStat = s.PerRun(metrics.RunMean), string(metrics.RunMean)
	f.Cells = []results.Cell{{
		Scenario: "sequential", Steps: gaps + 1, Version: "resilient", World: "sim", Profile: "cloud", Runs: runs,
		Metrics: map[string]results.Metric{metrics.STSO: stso, metrics.TTLS: results.NewMetric(ttls, 0)},
	}}
	return f
}

// TestCompareTestsRuns: two sweeps of one cell, drawn alike (8 runs of 30
// gaps each). Over the 240 pooled gaps a side the Mann-Whitney test calls
// the run-to-run scatter a significant change; over the 8 per-run means it
// correctly does not, and n counts runs.
func TestCompareTestsRuns(t *testing.T) {
	base := runsFile(1, 8, 30, 0.2, 0.05, 1)
	head := runsFile(4, 8, 30, 0.2, 0.05, 1)
	pooled := MannWhitney(base.Cells[0].Metrics["stso"].Values, head.Cells[0].Metrics["stso"].Values, Alpha)
	if !pooled.Significant {
		t.Fatalf("the pooled test is not fooled here (p=%.3f): pick another seed for the demonstration", pooled.P)
	}
	c, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var row *MetricRow
	for i, m := range c.Metrics {
		if m.Metric == "stso" {
			row = &c.Metrics[i].Rows[0]
		}
	}
	if row == nil {
		t.Fatal("no stso row")
	}
	if row.Test.N1 != 8 || row.Test.N2 != 8 || row.Unit != UnitRun || row.Statistic != "run mean" {
		t.Errorf("stso row tested n=%d+%d %s on %q, want 8+8 runs on the run mean", row.Test.N1, row.Test.N2, row.Unit, row.Statistic)
	}
	if row.Test.Significant || row.Verdict != VerdictSame || row.Delta() != "~" {
		t.Errorf("stso row p=%.3f verdict %q delta %q: run-to-run scatter called a change (pooled p=%.4f)", row.Test.P, row.Verdict, row.Delta(), pooled.P)
	}
	t.Logf("pooled p=%.4f n=%d+%d; per-run p=%.3f n=%d+%d", pooled.P, pooled.N1, pooled.N2, row.Test.P, row.Test.N1, row.Test.N2)
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stso (run mean)", "n=8 runs"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	// A real shift of every run by 50% is still found with 8 runs.
	slow := runsFile(3, 8, 30, 0.2, 0.05, 1.5)
	c, err = Compare(base, slow, CompareOptions{Metrics: []string{"stso"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Metrics[0].Rows[0]; !r.Test.Significant || r.Verdict != VerdictWorse {
		t.Errorf("a 50%% slower head: p=%.3f verdict %q, want worse", r.Test.P, r.Verdict)
	}
}

// TestComparePooledFallback: a file written before per-run aggregates is
// tested on pooled samples, and the comparison says so.
func TestComparePooledFallback(t *testing.T) {
	base := runsFile(1, 8, 30, 0.2, 0.05, 1)
	head := runsFile(4, 8, 30, 0.2, 0.05, 1)
	m := base.Cells[0].Metrics["stso"]
	m.PerRun, m.PerRunStat = nil, ""
	base.Cells[0].Metrics["stso"] = m
	c, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "base has no per-run aggregates for stso") {
		t.Errorf("Warnings = %q, want the pooled fallback named", c.Warnings)
	}
	r := c.Metrics[1].Rows[0]
	if c.Metrics[1].Metric != "stso" || r.Unit != UnitSample || r.Test.N1 != 240 {
		t.Errorf("stso row: unit %q n=%d, want pooled samples (240)", r.Unit, r.Test.N1)
	}
	var md bytes.Buffer
	if err := c.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "- ⚠️ base has no per-run aggregates") || !strings.Contains(md.String(), "samples |") {
		t.Errorf("markdown does not say the test pooled samples:\n%s", md.String())
	}
}

// TestCompareNull: with a null sweep every row carries the null Δ, and a
// significant change no larger than it is noise; the JSON document has
// every field CI reads.
func TestCompareNull(t *testing.T) {
	base := synthFile(1, 30, 0.05, 1, synthMatrix)
	null := synthFile(2, 30, 0.05, 1.08, synthMatrix) // the environment drew 8% slower
	head := synthFile(3, 30, 0.05, 1.06, synthMatrix)
	c, err := Compare(base, head, CompareOptions{Null: null, NullLabel: "base2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Metrics {
		for _, r := range m.Rows {
			if !r.InNull || math.IsNaN(r.NullDeltaPct) || r.NullDeltaPct < 3 {
				t.Errorf("%s %s: null Δ %.2f%%, want ≈ +8%%", m.Metric, r.Cell, r.NullDeltaPct)
			}
			if r.Test.Significant && r.Verdict != VerdictNoise && math.Abs(r.DeltaPct) <= math.Abs(r.NullDeltaPct) {
				t.Errorf("%s %s: Δ %.2f%% ≤ null %.2f%% but verdict %q", m.Metric, r.Cell, r.DeltaPct, r.NullDeltaPct, r.Verdict)
			}
		}
	}
	var noise int
	for _, m := range c.Metrics {
		for _, r := range m.Rows {
			if r.Verdict == VerdictNoise {
				noise++
				if !strings.Contains(r.Delta(), "null") {
					t.Errorf("noise row renders %q", r.Delta())
				}
			}
		}
	}
	if noise == 0 {
		t.Error("no row judged within the null spread: a 6% head against an 8% null")
	}
	var js bytes.Buffer
	if err := c.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema string
		Null   *struct{ Label string }
		Rows   []map[string]any
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != CompareJSONSchema || doc.Null == nil || doc.Null.Label != "base2" || len(doc.Rows) != 12 {
		t.Fatalf("json: schema %q null %v rows %d", doc.Schema, doc.Null, len(doc.Rows))
	}
	for _, k := range []string{"metric", "cell", "unit", "n_base", "n_head", "statistic", "p", "delta_pct", "null_delta_pct", "verdict"} {
		if _, ok := doc.Rows[0][k]; !ok {
			t.Errorf("json row lacks %q: %v", k, doc.Rows[0])
		}
	}
	if doc.Rows[0]["unit"] != "run" || doc.Rows[0]["n_base"] != float64(30) {
		t.Errorf("json row %v: want unit run, n_base 30", doc.Rows[0])
	}

	// A null sweep that is not the baseline's matrix is refused.
	if _, err := Compare(base, head, CompareOptions{Null: synthFile(2, 30, 0.05, 1, synthMatrix[:2])}); err == nil || !strings.Contains(err.Error(), "null sweep lacks") {
		t.Errorf("null with fewer cells: err = %v", err)
	}
}

// TestGateNull: a head 20% slower fails "p50 < 1.10x baseline"; when the
// baseline swept twice already differs by 25%, the same head is within the
// null spread and passes, saying why.
func TestGateNull(t *testing.T) {
	cells := synthMatrix[5:6]
	base := synthFile(1, 30, 0.05, 1, cells)
	head := synthFile(2, 30, 0.05, 1.2, cells)
	rules, err := ParseRules("r", strings.NewReader("ttls.p50 < 1.10x baseline\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Gate(head, base, rules)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() {
		t.Fatal("a 20% slower head passed without a null sweep")
	}
	c := rep.Rules[0].Checks[0]
	if c.Unit != UnitRun || c.N1 != 30 || !math.IsNaN(c.NullRatio) {
		t.Errorf("check unit %q n=%d null %v", c.Unit, c.N1, c.NullRatio)
	}
	wide := synthFile(3, 30, 0.05, 1.25, cells)
	rep, err = GateNull(head, base, wide, rules)
	if err != nil {
		t.Fatal(err)
	}
	c = rep.Rules[0].Checks[0]
	if !rep.Passed() || !strings.Contains(c.Note, "null") || math.Abs(c.NullRatio-1.25) > 0.05 {
		t.Errorf("within a 25%% null spread: passed=%v note %q null ratio %.3f", rep.Passed(), c.Note, c.NullRatio)
	}
	narrow := synthFile(4, 30, 0.05, 1.02, cells)
	if rep, err = GateNull(head, base, narrow, rules); err != nil || rep.Passed() {
		t.Errorf("beyond a 2%% null spread: passed=%v err=%v, want a failure", rep.Passed(), err)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"schema": "durabench/gate/v1"`, `"passed": false`, `"null_ratio": 1.0`, `"unit": "run"`, `"verdict": "FAIL"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("gate json lacks %s:\n%s", want, js.String())
		}
	}
	if _, err := GateNull(head, nil, narrow, rules); err == nil {
		t.Error("a null sweep without a baseline was accepted")
	}
}

// TestCompareMismatchWarnings: what differs besides the change under test
// is named, field by field; the methodology is refused.
func TestCompareMismatchWarnings(t *testing.T) {
	base := synthFile(1, 10, 0.05, 1, synthMatrix[:1])
	head := synthFile(2, 10, 0.05, 1, synthMatrix[:1])
	for _, f := range []*results.File{base, head} {
		f.Cells[0].Target, f.Cells[0].Engine = "myengine", "my-engine"
	}
	base.Cells[0].EngineVersion, head.Cells[0].EngineVersion = "1.2.0", "1.3.0"
	base.Cells[0].ClockErrorUS, head.Cells[0].ClockErrorUS = 40, 4000
	base.Plan.Reps, head.Plan.Reps = 10, 20
	base.Plan.WorldOptions.PostgresFsync, head.Plan.WorldOptions.PostgresFsync = "on", "off"
	head.Plan.Spans = results.SpansOff
	bs, hs := 0.02, 0.55
	base.Cells[0].CPU = &results.CellCPU{DurabenchCores: 0.6, StealCores: &bs}
	head.Cells[0].CPU = &results.CellCPU{DurabenchCores: 0.6, StealCores: &hs}
	c, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Warnings, "\n")
	for _, want := range []string{"reps differs: base 10, head 20", "PostgreSQL fsync differs: base on, head off",
		"spans differs: base on, head off",
		`engine version differs in fanout/branches=20/target=myengine/profile=cloud: base "1.2.0", head "1.3.0"`,
		"clock bound class differs in fanout/branches=20/target=myengine/profile=cloud: base < 100µs, head < 10ms",
		"host steal differs in fanout/branches=20/target=myengine/profile=cloud: base 0.02 cores, head 0.55"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	// Steal within a tenth of a core, or taken from both sides alike, or
	// recorded on one side only, is not warned about.
	for _, tc := range [][2]float64{{0.02, 0.11}, {0.36, 0.48}, {0.5, 0.3}} {
		bs, hs = tc[0], tc[1]
		c, _ = Compare(base, head, CompareOptions{})
		if got := strings.Join(c.Warnings, "\n"); strings.Contains(got, "host steal") {
			t.Errorf("%.2f against %.2f cores warned:\n%s", bs, hs, got)
		}
	}
	bs, hs = 0.3, 0.1
	c, _ = Compare(base, head, CompareOptions{})
	if got := strings.Join(c.Warnings, "\n"); !strings.Contains(got, "host steal differs in fanout/branches=20/target=myengine/profile=cloud: base 0.30 cores, head 0.10") {
		t.Errorf("0.30 against 0.10 cores not warned:\n%s", got)
	}
	base.Cells[0].CPU = nil
	hs = 0.9
	c, _ = Compare(base, head, CompareOptions{})
	if got := strings.Join(c.Warnings, "\n"); strings.Contains(got, "host steal") {
		t.Errorf("steal recorded on one side only warned:\n%s", got)
	}
	head.Methodology++
	if _, err := Compare(base, head, CompareOptions{}); err == nil || !strings.Contains(err.Error(), "methodology") {
		t.Errorf("another methodology: err = %v", err)
	}
}

func TestFisherExact(t *testing.T) {
	// The textbook table (Wikipedia, "Fisher's exact test"): p ≈ 0.002759.
	if p := FisherExact(1, 9, 11, 3); math.Abs(p-0.002759) > 1e-5 {
		t.Errorf("FisherExact(1,9,11,3) = %.6f, want 0.002759", p)
	}
	if p := FisherExact(5, 5, 5, 5); p != 1 {
		t.Errorf("identical rows: p = %v, want 1", p)
	}
}

// bimodalTTFS is a sweep of one fanout cell whose TTFS has fast runs
// near 30 ms and slow runs near 900 ms.
func bimodalTTFS(fast, slow int) *results.File {
	var v []int64
	for i := range fast {
		v = append(v, 30_000+int64(i))
	}
	for i := range slow {
		v = append(v, 900_000+int64(i)*1000)
	}
	f := synthFile(1, 0, 0, 1, nil)
	f.Cells = []results.Cell{{Scenario: "fanout", Branches: 8, Version: "resilient", World: "nats", Profile: "none", Runs: len(v),
		Metrics: map[string]results.Metric{"ttfs": results.NewMetric(v, 0)}}}
	return f
}

// TestFastModeShare: TTFS is bimodal. A head none of whose 30 runs
// happened to take the fast mode (3 of 30 in the base) has a best 30×
// slower, yet the share is not a significant change; a head that lost a
// fast mode of 10 runs in 30 is.
func TestFastModeShare(t *testing.T) {
	ttfs := bimodalTTFS
	c, err := Compare(ttfs(3, 27), ttfs(0, 30), CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Metrics[0].Shares
	if len(s) != 1 || s[0].BaseFast != 3 || s[0].HeadFast != 0 || s[0].Significant || s[0].ThresholdUS != 60_000 {
		t.Errorf("3/30 → 0/30: %+v, want not significant, threshold 60ms", s)
	}
	c, err = Compare(ttfs(10, 20), ttfs(0, 30), CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s = c.Metrics[0].Shares
	if len(s) != 1 || !s[0].Significant || math.Abs(s[0].DeltaPP+33.3) > 0.1 {
		t.Errorf("10/30 → 0/30: %+v, want significant, -33 pp", s)
	}
	var text, md, js bytes.Buffer
	_ = c.WriteText(&text)
	_ = c.WriteMarkdown(&md)
	_ = c.WriteJSON(&js)
	for _, out := range []string{text.String(), md.String()} {
		if !strings.Contains(out, "fast mode") && !strings.Contains(out, "fast-mode") {
			t.Errorf("no fast-mode share in:\n%s", out)
		}
	}
	if !strings.Contains(js.String(), `"base_fast": 10`) || !strings.Contains(js.String(), `"verdict": "worse"`) {
		t.Errorf("json shares:\n%s", js.String())
	}
	t.Logf("%s", text.String())
}

// TestCompareAcrossWorlds: two sweeps of different worlds share no cell;
// the comparison says why instead of printing empty tables.
func TestCompareAcrossWorlds(t *testing.T) {
	base := synthFile(1, 10, 0.05, 1, synthMatrix[:1])
	head := synthFile(2, 10, 0.05, 1, synthMatrix[:1])
	head.Cells[0].World = "nats"
	c, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Warnings, "\n"); !strings.Contains(got, "worlds differ: base sim, head nats") {
		t.Errorf("warnings %q", got)
	}
	// Selected engines compare across worlds on purpose: no warning.
	b, err := SelectEngine(base, "reference")
	if err != nil {
		t.Fatal(err)
	}
	h, err := SelectEngine(head, "reference")
	if err != nil {
		t.Fatal(err)
	}
	if c, err = Compare(b, h, CompareOptions{}); err != nil || len(c.Warnings) != 0 {
		t.Errorf("selected engines: warnings %q err %v", c.Warnings, err)
	}
}

// TestGateRepeat: ABAB. A 20% slower head fails a relative rule when the
// second head repeats it, and passes, saying the change was not repeated,
// when the second head is as fast as the baseline; an absolute bound fails
// when either head breaks it.
func TestGateRepeat(t *testing.T) {
	cells := synthMatrix[5:6]
	base := synthFile(1, 30, 0.05, 1, cells)
	head := synthFile(2, 30, 0.05, 1.2, cells)
	null := synthFile(3, 30, 0.05, 1.01, cells)
	rules, err := ParseRules("r", strings.NewReader("ttls.p50 < 1.10x baseline\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := GateRepeat(head, base, null, synthFile(4, 30, 0.05, 1.2, cells), rules)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() || !rep.HasAgain {
		t.Errorf("a 20%% slower head, repeated: passed=%v again=%v, want a failure", rep.Passed(), rep.HasAgain)
	}
	rep, err = GateRepeat(head, base, null, synthFile(4, 30, 0.05, 1, cells), rules)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Rules[0].Checks[0]
	if !rep.Passed() || !strings.Contains(c.Note, "not repeated") || c.Ratio < 1.15 {
		t.Errorf("a change the second head does not repeat: passed=%v ratio %.3f note %q", rep.Passed(), c.Ratio, c.Note)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ABAB") || !strings.Contains(text.String(), "not repeated") {
		t.Errorf("the text does not say it gated ABAB and why it passed:\n%s", text.String())
	}

	// An absolute bound between the first head and a slower second head.
	bound := fmt.Sprintf("ttls.p50 < %.0fus\n", c.Value*1.1)
	abs, err := ParseRules("r", strings.NewReader(bound))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err = GateNull(head, base, null, abs); err != nil || !rep.Passed() {
		t.Fatalf("%q on the first head alone: passed=%v err=%v", bound, rep.Passed(), err)
	}
	rep, err = GateRepeat(head, base, null, synthFile(4, 30, 0.05, 1.5, cells), abs)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Rules[0].Checks[0]; rep.Passed() || !strings.Contains(c.Note, "second head") {
		t.Errorf("%q broken by the second head only: passed=%v note %q", bound, rep.Passed(), c.Note)
	}
	if _, err := GateRepeat(head, base, nil, head, rules); err == nil {
		t.Error("a repeated head without a null sweep was accepted")
	}
}

// TestGateFastShare: fast_share rules. A head that lost its fast mode (10
// of 30 runs → 0 of 30) fails "ttfs.fast_share >= baseline - 20pp"; 3 of
// 30 → 0 of 30 is past nothing; 10 → 4 of 30 is past the threshold but
// not significant (Fisher's exact test) and passes saying so; a null
// sweep that lost as much passes the first head; the absolute form holds
// as written.
func TestGateFastShare(t *testing.T) {
	ttfs := bimodalTTFS
	rule := func(text string) []Rule {
		r, err := ParseRules("r", strings.NewReader(text+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rel := rule("ttfs.fast_share >= baseline - 20pp")
	gate := func(head, base, null *results.File, rules []Rule) (*GateReport, Check) {
		t.Helper()
		rep, err := GateNull(head, base, null, rules)
		if err != nil {
			t.Fatal(err)
		}
		return rep, rep.Rules[0].Checks[0]
	}
	rep, c := gate(ttfs(0, 30), ttfs(10, 20), nil, rel)
	if rep.Passed() || c.Value != 0 || math.Abs(c.Baseline-33.3) > 0.1 || c.P >= Alpha || c.N1 != 30 || c.Unit != UnitRun {
		t.Errorf("10/30 → 0/30: passed=%v %+v, want a failure", rep.Passed(), c)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "0%  base 33%") || !strings.Contains(text.String(), "10/30 → 0/30 runs under 60.00ms") {
		t.Errorf("the text does not show the shares and the runs under the threshold:\n%s", text.String())
	}
	if rep, _ := gate(ttfs(0, 30), ttfs(3, 27), nil, rel); !rep.Passed() {
		t.Error("3/30 → 0/30 failed a 20 pp rule")
	}
	if rep, c := gate(ttfs(4, 26), ttfs(10, 20), nil, rel); !rep.Passed() || !strings.Contains(c.Note, "not significantly") {
		t.Errorf("10/30 → 4/30 (not significant): passed=%v note %q", rep.Passed(), c.Note)
	}
	if rep, c := gate(ttfs(0, 30), ttfs(10, 20), ttfs(0, 30), rel); !rep.Passed() || !strings.Contains(c.Note, "null") {
		t.Errorf("within a null sweep that lost its fast mode too: passed=%v note %q", rep.Passed(), c.Note)
	}
	if rep, c := gate(ttfs(0, 30), ttfs(10, 20), ttfs(9, 21), rel); rep.Passed() || !strings.Contains(c.Note, "null 9/30") {
		t.Errorf("beyond a null sweep of 9/30: passed=%v note %q", rep.Passed(), c.Note)
	}
	// Absolute, without a baseline: the share of the head's own runs.
	if rep, c := gate(ttfs(10, 20), nil, nil, rule("ttfs.fast_share >= 50%")); rep.Passed() || math.Abs(c.Value-33.3) > 0.1 {
		t.Errorf("10/30 against >= 50%%: passed=%v value %.1f", rep.Passed(), c.Value)
	}
	if rep, _ := gate(ttfs(20, 10), nil, nil, rule("ttfs.fast_share >= 50%")); !rep.Passed() {
		t.Error("20/30 failed >= 50%")
	}
	// ABAB: a drop the second pair does not repeat passes.
	rep, err := GateRepeat(ttfs(0, 30), ttfs(10, 20), ttfs(10, 20), ttfs(10, 20), rel)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Rules[0].Checks[0]; !rep.Passed() || !strings.Contains(c.Note, "not repeated") {
		t.Errorf("a drop not repeated in the second pair: passed=%v note %q", rep.Passed(), c.Note)
	}
}

// TestGateRunRatio: a relative rule on a metric with several samples per
// run (STSO) shows, beside the pooled percentile's ratio, the ratio of the
// per-run statistic's medians the test runs on; a one-sample-per-run
// metric (TTLS) has none, its pooled percentiles being the runs' own.
func TestGateRunRatio(t *testing.T) {
	base := runsFile(1, 8, 30, 0.2, 0.05, 1)
	head := runsFile(3, 8, 30, 0.2, 0.05, 1.5)
	rules, err := ParseRules("r", strings.NewReader("stso.p50 < 1.10x baseline\nttls.p50 < 1.10x baseline\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Gate(head, base, rules)
	if err != nil {
		t.Fatal(err)
	}
	stso, ttls := rep.Rules[0].Checks[0], rep.Rules[1].Checks[0]
	if math.IsNaN(stso.RunRatio) || math.Abs(stso.RunRatio-1.5) > 0.3 || stso.Statistic != "run mean" {
		t.Errorf("stso: per-run ratio %.3f on %q, want ≈ 1.5 on the run mean", stso.RunRatio, stso.Statistic)
	}
	if !math.IsNaN(ttls.RunRatio) {
		t.Errorf("ttls (one sample per run): per-run ratio %.3f, want none", ttls.RunRatio)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "(per run ") || !strings.Contains(js.String(), `"run_ratio": 1.`) || !strings.Contains(js.String(), `"run_ratio": null`) {
		t.Errorf("the per-run ratio is not in the text and JSON:\n%s\n%s", text.String(), js.String())
	}
}

// TestCompareJudgesByDirection: a significant fall of a metric whose lower
// is better is "better", a rise "worse"; an informational metric (skew,
// which a slower engine can lower) is only "changed" either way, and the
// reports say it is informational.
func TestCompareJudgesByDirection(t *testing.T) {
	side := func(seed uint64, factor float64) *results.File {
		f := synthFile(seed, 30, 0.05, factor, synthMatrix[:1])
		rng := rand.New(rand.NewPCG(seed, 0x5e3))
		skew := synthMetric(lognormal(rng, 30, 40000, 0.05, factor))
		skew.PerRun, skew.PerRunStat = skew.Values, string(metrics.RunMedian)
		f.Cells[0].Metrics[metrics.Skew] = skew
		return f
	}
	base := side(1, 1)
	for _, tc := range []struct {
		factor     float64
		ttls, skew string
	}{{0.7, VerdictBetter, VerdictChanged}, {1.3, VerdictWorse, VerdictChanged}} {
		c, err := Compare(base, side(2, tc.factor), CompareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range c.Metrics {
			got[m.Metric] = m.Rows[0].Verdict
		}
		if got["ttls"] != tc.ttls || got["skew"] != tc.skew {
			t.Errorf("head %.1fx: ttls %q, skew %q; want %q, %q", tc.factor, got["ttls"], got["skew"], tc.ttls, tc.skew)
		}
		var text, md bytes.Buffer
		if err := c.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "skew (run median; informational)") || !strings.Contains(md.String(), "never a gain or a loss") {
			t.Errorf("the reports do not say skew is informational:\n%s\n%s", text.String(), md.String())
		}
	}
}
