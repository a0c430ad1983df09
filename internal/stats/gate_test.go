package stats

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
)

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Rule
	}{
		{"ttls{scenario=fanout,branches=256}.p90 < 1.10x baseline", Rule{
			Metric: "ttls", Stat: "p90", Op: "<", Threshold: 1.10, Relative: true,
			Selector: []Match{{"scenario", []string{"fanout"}}, {"branches", []string{"256"}}}}},
		{"ttfs.p75 < 200ms", Rule{Metric: "ttfs", Stat: "p75", Op: "<", Threshold: 200000}},
		{"  ttfs.p99<=1.5s   # a comment", Rule{Metric: "ttfs", Stat: "p99", Op: "<=", Threshold: 1.5e6}},
		{"stalls == 0", Rule{Count: "stalls", Op: "==", Threshold: 0}},
		{"errors{world=nats} == 0", Rule{Count: "errors", Op: "==", Selector: []Match{{"world", []string{"nats"}}}}},
		{"runs >= 30", Rule{Count: "runs", Op: ">=", Threshold: 30}},
		{"stso_inline{version=pending-count}.p50 <= 1.05x baseline", Rule{
			Metric: "stso_inline", Stat: "p50", Op: "<=", Threshold: 1.05, Relative: true,
			Selector: []Match{{"version", []string{"pending-count"}}}}},
		{"wo.mean != 0 us", Rule{Metric: "wo", Stat: "mean", Op: "!=", Threshold: 0}},
		{"ttfs.min > 500µs", Rule{Metric: "ttfs", Stat: "min", Op: ">", Threshold: 500}},
		{"ttfs.max >= 250ns", Rule{Metric: "ttfs", Stat: "max", Op: ">=", Threshold: 0.25}},
		{"skew.p90 < 2 s", Rule{Metric: "skew", Stat: "p90", Op: "<", Threshold: 2e6}},
		{"ttls{branches=64|256, switches=resilient-step-dispatch=0}.p50 < 1.2 x baseline", Rule{
			Metric: "ttls", Stat: "p50", Op: "<", Threshold: 1.2, Relative: true,
			Selector: []Match{{"branches", []string{"64", "256"}}, {"switches", []string{"resilient-step-dispatch=0"}}}}},
		{`ttls{switches="guard=on,resilient-step-dispatch=0"}.p50 < 1.2x baseline`, Rule{
			Metric: "ttls", Stat: "p50", Op: "<", Threshold: 1.2, Relative: true,
			Selector: []Match{{"switches", []string{"guard=on+resilient-step-dispatch=0"}}}}},
	} {
		got, err := ParseRule(tc.text)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.text, err)
			continue
		}
		got.Text, got.Source = "", ""
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRule(%q)\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
		// The canonical form parses back to the same rule.
		again, err := ParseRule(got.String())
		if err != nil {
			t.Errorf("re-parse of %q: %v", got.String(), err)
			continue
		}
		again.Text, again.Source = "", ""
		if !reflect.DeepEqual(again, got) {
			t.Errorf("round trip of %q via %q: %+v", tc.text, got.String(), again)
		}
	}
}

func TestParseRulesMalformed(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"ttfs.p75 < 200", "rules.txt:1:15: expected unit after number (ns, us, µs, ms, s, or x baseline)"},
		{"ttfs.p75 < 200 parsecs", "rules.txt:1:16: unknown unit \"parsecs\" (want ns, us, µs, ms, s, or x baseline)"},
		{"ttfs.p75 200ms", "rules.txt:1:10: expected a comparison operator (<, <=, >, >=, ==, !=)"},
		{"ttfs.p75 =< 200ms", "rules.txt:1:10: expected a comparison operator (<, <=, >, >=, ==, !=)"},
		{"ttfs < 200ms", "rules.txt:1:5: ttfs needs a statistic, e.g. ttfs.p90"},
		{"ttfs.p95 < 200ms", "rules.txt:1:6: unknown statistic \"p95\" (want min, p50, p75, p90, p99, max, mean, or fast_share of a bimodal metric)"},
		{"ttls.fast_share >= 50%", "rules.txt:1:6: fast_share is the fast-mode share of a bimodal metric (metrics/defs.go: ttfs); ttls is not one"},
		{"ttfs.fast_share >= 50", "rules.txt:1:20: fast_share is a percentage: expected N% or baseline [- N pp]"},
		{"ttfs.fast_share >= 120%", "rules.txt:1:20: a share is at most 100%"},
		{"ttfs.fast_share >= 1.1x baseline", "rules.txt:1:20: fast_share is a percentage: expected N% or baseline [- N pp]"},
		{"ttfs.fast_share >= baseline * 2", "rules.txt:1:29: expected '- N pp' or '+ N pp' after baseline"},
		{"ttfs.fast_share >= baseline - 20", "rules.txt:1:33: expected pp (percentage points) after 20"},
		{"ttfs.fast_share >= baseline - 20pp or so", "rules.txt:1:36: unexpected \"or so\" after the rule"},
		{"ttfs. < 200ms", "rules.txt:1:6: expected a statistic after '.' (min, p50, p75, p90, p99, max, mean)"},
		{"ttfs.p75 < ms", "rules.txt:1:12: expected a number"},
		{"ttfs.p75 < -5ms", "rules.txt:1:12: thresholds are not negative"},
		{"ttfs.p75 < 1.1x", "rules.txt:1:16: expected 'baseline' after '1.1x'"},
		{"ttfs.p75 < 1.1x main", "rules.txt:1:17: expected 'baseline' after '1.1x'"},
		{"ttfs.p75 < 0x baseline", "rules.txt:1:12: a relative threshold must be above 0x baseline"},
		{"ttfs.p75 < 200ms or so", "rules.txt:1:18: unexpected \"or so\" after the rule"},
		{"stalls.p90 == 0", "rules.txt:1:7: stalls is a count and takes no statistic"},
		{"stalls == 0ms", "rules.txt:1:12: stalls is a count; compare it with a plain number, not ms"},
		{"errors < 1.1x baseline", "rules.txt:1:10: relative thresholds apply to metrics; compare errors with a number"},
		{"< 200ms", "rules.txt:1:1: expected a metric (e.g. ttls) or a count (stalls, errors, runs)"},
		{"ttls{scenario=fanout.p90 < 1.1x baseline", "rules.txt:1:5: unterminated selector: missing '}'"},
		{"ttls{}.p90 < 1.1x baseline", "rules.txt:1:6: empty selector"},
		{"ttls{color=red}.p90 < 1.1x baseline", "rules.txt:1:6: unknown selector field \"color\" (want scenario, branches, steps, target, version, switches, world, profile)"},
		{"ttls{scenario}.p90 < 1.1x baseline", "rules.txt:1:14: expected '=' after scenario"},
		{"ttls{scenario=}.p90 < 1.1x baseline", "rules.txt:1:15: expected a value for scenario"},
		{"ttls{branches=many}.p90 < 1.1x baseline", "rules.txt:1:15: branches must be a whole number, not \"many\""},
		{"ttls{branches=1,branches=2}.p90 < 1.1x baseline", "rules.txt:1:17: selector field \"branches\" given twice"},
		{"ttls{world=nats;profile=none}.p90 < 1.1x baseline", "rules.txt:1:16: expected ',' or '}' in selector"},
		{"ttls{world=}.p90 < 1.1x baseline", "rules.txt:1:12: expected a value for world"},
		{`ttls{version="abc}.p90 < 1.1x baseline`, "rules.txt:1:14: unterminated quoted value"},
		{`ttls{version="a" x}.p90 < 1.1x baseline`, "rules.txt:1:18: expected ',' or '}' in selector"},
		{"ttls{world=nats}p90 < 1s", "rules.txt:1:17: unexpected 'p' after metric name"},
		{"ttfs.p75 < 1..2ms", "rules.txt:1:12: expected a number"},
	} {
		_, err := ParseRules("rules.txt", strings.NewReader(tc.text))
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.text, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.text, err, tc.want)
		}
		if !errors.Is(err, ErrRules) || !errors.Is(err, results.ErrInvalid) {
			t.Errorf("%q: error does not match ErrRules and ErrInvalid", tc.text)
		}
		var re *RuleError
		if !errors.As(err, &re) || re.Line != 1 {
			t.Errorf("%q: error is not a *RuleError on line 1: %#v", tc.text, err)
		}
	}
}

func TestParseRulesFile(t *testing.T) {
	src := "# gate\n\nttfs.p75 < 200ms\n  # indented comment\nstalls == 0\nttls.p90 < 1.1\nerrors = 0\n"
	_, err := ParseRules("rules.txt", strings.NewReader(src))
	want := "rules.txt:6:15: expected unit after number (ns, us, µs, ms, s, or x baseline)\n" +
		"rules.txt:7:8: expected a comparison operator (<, <=, >, >=, ==, !=)"
	if err == nil || err.Error() != want {
		t.Fatalf("every bad line is reported:\n got %v\nwant %s", err, want)
	}
	rules, err := ParseRules("rules.txt", strings.NewReader(src[:strings.Index(src, "ttls")]))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].Source != "rules.txt:3" || rules[1].Source != "rules.txt:5" || rules[0].Text != "ttfs.p75 < 200ms" {
		t.Errorf("rules = %+v", rules)
	}
	if _, err := ParseRules("empty.txt", strings.NewReader("# nothing\n\n")); !errors.Is(err, ErrRules) || !strings.Contains(err.Error(), "no rules") {
		t.Errorf("empty rules file: %v", err)
	}
	if _, err := ParseRule("  "); err == nil || err.Error() != "--rule:1:1: empty rule" {
		t.Errorf("empty --rule: %v", err)
	}
}

func TestDefaultRules(t *testing.T) {
	rules := DefaultRules()
	var texts []string
	for _, r := range rules {
		texts = append(texts, r.String())
		if r.Metric != "" && !r.AllowEmpty {
			t.Errorf("default metric rule %q must allow matching no cell", r.Text)
		}
	}
	want := []string{"ttls.p50 < 1.1x baseline", "ttls.p90 < 1.1x baseline", "ttfs.p50 < 1.1x baseline", "ttfs.p90 < 1.1x baseline", "stalls == 0", "errors == 0"}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("DefaultRules = %q, want %q", texts, want)
	}
}

func TestGateExampleRules(t *testing.T) {
	data, err := examplesRules()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules("examples/gate-rules.txt", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the example rules file does not parse: %v", err)
	}
	if len(rules) < 4 {
		t.Errorf("example rules: %d rules", len(rules))
	}
}

func mustRules(t *testing.T, text string) []Rule {
	t.Helper()
	rules, err := ParseRules("rules.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func gateOf(t *testing.T, head, base *results.File, rules []Rule) *GateReport {
	t.Helper()
	rep, err := Gate(head, base, rules)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGateIdenticalPasses(t *testing.T) {
	f := synthFile(1, 30, 0.2, 1, synthMatrix)
	rep := gateOf(t, f, f, DefaultRules())
	if !rep.Passed() || rep.outcome() != gatePassed || rep.Err() != nil {
		t.Errorf("identical samples: outcome %d, err %v", rep.outcome(), rep.Err())
	}
	for _, rr := range rep.Rules {
		if len(rr.Checks) != len(synthMatrix) {
			t.Errorf("%s: %d checks, want one per cell (%d)", rr.Rule.Text, len(rr.Checks), len(synthMatrix))
		}
		for _, c := range rr.Checks {
			if rr.Rule.Relative && (c.Ratio != 1 || c.Significant) {
				t.Errorf("%s %s: ratio %v p %v", rr.Rule.Text, c.Cell, c.Ratio, c.P)
			}
		}
	}
}

func TestGateShiftFails(t *testing.T) {
	base := synthFile(1, 30, 0.03, 1, synthMatrix)
	head := synthFile(2, 30, 0.03, 1, synthMatrix)
	moved := synthFile(3, 30, 0.03, 1.2, synthMatrix[5:6]).Cells[0] // resilient, 256 branches, +20%
	head.Cells[5] = moved
	rep := gateOf(t, head, base, DefaultRules())
	if rep.Passed() || rep.outcome() != gateFailed || !errors.Is(rep.Err(), ErrGateFailed) {
		t.Fatalf("+20%% shift: outcome %d err %v, want a failed gate", rep.outcome(), rep.Err())
	}
	failed := rep.Failed()
	if len(failed) != 4 {
		t.Errorf("%d failed checks, want 4 (p50/p90 of ttls and ttfs on the moved cell)", len(failed))
	}
	for _, f := range failed {
		if f.Check.Cell != KeyOf(&moved) {
			t.Errorf("failed on %s, want only %s", f.Check.Cell, KeyOf(&moved))
		}
		if f.Check.Ratio < 1.1 || !f.Check.Significant || f.Check.P >= Alpha {
			t.Errorf("%s: ratio %.3f p %.3f", f.Rule.Text, f.Check.Ratio, f.Check.P)
		}
	}
	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	t.Logf("text:\n%s", text.String())
	t.Logf("markdown:\n%s", md.String())
	for _, want := range []string{"FAIL: 4 of 36 checks failed (6 rules)", "FAIL  ttls.p90 < 1.10x baseline  (default rules:3): 1 of 6 cells failed",
		"FAIL  branches=256/version=resilient", "p=0.000 n=30"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	for _, want := range []string{"**Gate ❌", "| `ttls.p90 < 1.10x baseline` | branches=256/version=resilient |", "<details><summary>All 36 checks of 6 rules</summary>"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown report lacks %q", want)
		}
	}
}

func TestGateSmallShiftPasses(t *testing.T) {
	// +2% on every cell under realistic noise (σ = 0.15 in log space, 30
	// runs): under the threshold, and mostly not even significant.
	base := synthFile(11, 30, 0.15, 1, synthMatrix)
	head := synthFile(12, 30, 0.15, 1.02, synthMatrix)
	rep := gateOf(t, head, base, DefaultRules())
	if !rep.Passed() {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Errorf("+2%% shift failed the gate:\n%s", b.String())
	}
}

func TestGateOverThresholdButNotSignificant(t *testing.T) {
	// Three runs a side can never reach p < 0.05: a 50% jump is reported
	// but does not fail the gate.
	mk := func(vals ...int64) *results.File {
		return &results.File{Schema: results.Schema, Methodology: results.Methodology, Cells: []results.Cell{{
			Scenario: "fanout", Branches: 20, Version: "v", World: "sim", Profile: "none", Runs: len(vals),
			Metrics: map[string]results.Metric{"ttls": synthMetric(vals)},
		}}}
	}
	rep := gateOf(t, mk(150, 151, 152), mk(100, 101, 102), mustRules(t, "ttls.p50 < 1.1x baseline"))
	c := rep.Rules[0].Checks[0]
	if !rep.Passed() || c.Verdict != Pass || c.Ratio < 1.4 || !strings.Contains(c.Note, "not significant") {
		t.Errorf("check = %+v, want a pass noting the change is not significant", c)
	}
}

func TestGateAbsoluteRules(t *testing.T) {
	f := synthFile(1, 30, 0.05, 1, synthMatrix) // ttfs medians 28..45 ms
	f.Cells[2].Stalls = 1
	f.Cells[2].StalledRuns = []results.StalledRun{{Run: "run-17", TTLSMS: 306000, Finished: true}}
	f.Cells[3].Stalls = 4
	f.Cells[3].StalledRuns = []results.StalledRun{{Run: "run-1", TTLSMS: 60000}, {Run: "run-2", NotStarted: true}, {Run: "run-3", NotStarted: true}, {Run: "run-4", NotStarted: true}}
	f.Cells[4].Errors = 2
	f.Cells[4].FailedRuns = []results.FailedRun{{Run: "run-3", Error: "world: transient"}}
	rep := gateOf(t, f, nil, mustRules(t, `
ttfs.p75 < 200ms
ttfs{branches=256}.p50 < 42ms
stalls == 0
errors{version=baseline} == 0
runs >= 30
`))
	verdicts := map[string][]string{}
	for _, rr := range rep.Rules {
		for _, c := range rr.Checks {
			if c.Verdict == Fail {
				verdicts[rr.Rule.Text] = append(verdicts[rr.Rule.Text], fmt.Sprintf("%s %s", c.Cell, c.Note))
			}
		}
	}
	want := map[string][]string{
		"ttfs{branches=256}.p50 < 42ms": {"fanout/branches=256/version=baseline/switches=none/world=sim/profile=cloud "},
		"stalls == 0": {
			"fanout/branches=20/version=resilient/switches=none/world=sim/profile=cloud run-1 60.00s (unfinished), run-2 (not started before the cell timeout), run-3 (not started before the cell timeout), and 1 more",
			"fanout/branches=256/version=baseline/switches=none/world=sim/profile=cloud run-17 306.0s",
		},
	}
	if !reflect.DeepEqual(verdicts, want) {
		t.Errorf("failures = %q\nwant %q", verdicts, want)
	}
	if n := len(rep.Rules[3].Checks); n != 3 {
		t.Errorf("errors{version=baseline}: %d checks, want 3 (the baseline cells; the erroring cell is resilient)", n)
	}
	if rep.outcome() != gateFailed {
		t.Errorf("outcome %d, want failed", rep.outcome())
	}
}

func TestGateUnmatchedRule(t *testing.T) {
	f := synthFile(1, 10, 0.05, 1, synthMatrix)
	rep := gateOf(t, f, f, mustRules(t, "ttls{branches=1024}.p90 < 1.1x baseline\nstso.p50 < 10ms\nstalls{world=nats} == 0\nerrors == 0"))
	if got := len(rep.Unmatched()); got != 3 {
		t.Errorf("%d unmatched rules, want 3", got)
	}
	if rep.Passed() || rep.outcome() != gateUnmatched || !errors.Is(rep.Err(), ErrRules) {
		t.Errorf("outcome %d err %v, want unmatched / ErrRules", rep.outcome(), rep.Err())
	}
	if !strings.Contains(rep.Err().Error(), "ttls{branches=1024}.p90 < 1.1x baseline (rules.txt:1)") {
		t.Errorf("error does not name the rule: %v", rep.Err())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "ERR   stso.p50 < 10ms  (rules.txt:2): matches no cell of the head sweep") {
		t.Errorf("text report:\n%s", text.String())
	}
}

func TestGateCellOnlyInHead(t *testing.T) {
	base := synthFile(1, 30, 0.05, 1, synthMatrix[:5])
	head := synthFile(2, 30, 0.05, 1.5, synthMatrix) // cell 5 is new, and 50% slower than anything
	head.Cells = head.Cells[5:]
	rep := gateOf(t, head, base, DefaultRules())
	if !rep.Passed() {
		t.Fatalf("a new cell has no baseline and cannot regress: outcome %d %v", rep.outcome(), rep.Err())
	}
	c := rep.Rules[0].Checks[0]
	if c.Verdict != NoBaseline || c.Note != "not in the baseline" || c.Cell.Branches != 256 {
		t.Errorf("check = %+v, want the new cell listed as new", c)
	}
	if len(rep.Missing) != 5 {
		t.Errorf("Missing = %v, want the 5 baseline cells the head lacks", rep.Missing)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "only in the baseline (5 cells, not compared):") {
		t.Errorf("text report does not list the missing cells:\n%s", text.String())
	}
}

func TestGateInputErrors(t *testing.T) {
	f := synthFile(1, 10, 0.05, 1, synthMatrix)
	if _, err := Gate(f, nil, DefaultRules()); !errors.Is(err, ErrRules) || !strings.Contains(err.Error(), "--baseline") {
		t.Errorf("relative rule without a baseline: %v", err)
	}
	if _, err := Gate(f, f, nil); !errors.Is(err, ErrRules) {
		t.Errorf("no rules: %v", err)
	}
	partial := *f
	partial.Partial = true
	rep := gateOf(t, &partial, f, DefaultRules())
	if rep.outcome() != gateSweepFailed || !errors.Is(rep.Err(), results.ErrSweepFailed) {
		t.Errorf("partial head: outcome %d %v, want sweep failed", rep.outcome(), rep.Err())
	}
}

// The acceptance checks of issue 7 on synthetic sweeps: per-run TTFS and
// TTLS drawn from seeded lognormal models (σ = 0.15 in log space, noisier
// than the sim world; 30 runs per cell, the 6-cell fan-out matrix), fast
// enough for every test run. gate_sim_test.go (build tag acceptance) runs
// the same checks on real sim-world sweeps.

func TestGateAcceptanceAA(t *testing.T) {
	const pairs = 20
	passed := 0
	for i := range pairs {
		base := synthFile(uint64(1000+2*i), 30, 0.15, 1, synthMatrix)
		head := synthFile(uint64(1001+2*i), 30, 0.15, 1, synthMatrix)
		rep := gateOf(t, head, base, DefaultRules())
		if rep.Passed() {
			passed++
		} else {
			t.Logf("A/A pair %d failed: %v", i, rep.Err())
		}
	}
	t.Logf("A/A: %d of %d pairs pass", passed, pairs)
	if passed < 19 {
		t.Errorf("A/A: %d of %d pairs pass, want at least 19", passed, pairs)
	}
}

func TestGateAcceptanceAB(t *testing.T) {
	for _, tc := range []struct {
		factor   float64
		wantFail bool
	}{{1.20, true}, {1.02, false}} {
		fails := 0
		for i := range 20 {
			base := synthFile(uint64(5000+2*i), 30, 0.15, 1, synthMatrix)
			head := synthFile(uint64(5001+2*i), 30, 0.15, tc.factor, synthMatrix)
			rep := gateOf(t, head, base, DefaultRules())
			if !rep.Passed() {
				fails++
				if len(rep.Failed()) == 0 {
					t.Errorf("x%.2f pair %d: failed without naming a check", tc.factor, i)
				}
			}
		}
		t.Logf("A/B x%.2f: %d of 20 pairs fail the gate", tc.factor, fails)
		if tc.wantFail && fails < 19 {
			t.Errorf("A/B +%.0f%%: only %d of 20 pairs fail", (tc.factor-1)*100, fails)
		}
		if !tc.wantFail && fails > 1 {
			t.Errorf("A/B +%.0f%%: %d of 20 pairs fail, want at most 1", (tc.factor-1)*100, fails)
		}
	}
}

// examplesRules reads the rules file the CI workflow uses.
func examplesRules() ([]byte, error) {
	return os.ReadFile("../../examples/gate-rules.txt")
}

// BenchmarkGate gates a sweep of the 6-cell matrix (30 runs a cell) with
// the default rules.
func BenchmarkGate(b *testing.B) {
	base := synthFile(1, 30, 0.15, 1, synthMatrix)
	head := synthFile(2, 30, 0.15, 1.15, synthMatrix)
	rules := DefaultRules()
	for b.Loop() {
		if _, err := Gate(head, base, rules); err != nil {
			b.Fatal(err)
		}
	}
}
