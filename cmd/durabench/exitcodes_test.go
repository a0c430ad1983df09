package main

import (
	"testing"

	"github.com/durabench/durabench/results"
)

// TestGateExitCode: the gate's exit codes, in their order of precedence.
func TestGateExitCode(t *testing.T) {
	failed := results.RuleReport{Rule: results.Rule{Text: "ttls.p50 < 1us"}, Checks: []results.Check{{Verdict: results.Fail}}}
	passed := results.RuleReport{Rule: results.Rule{Text: "errors == 0"}, Checks: []results.Check{{Verdict: results.Pass}}}
	unmatched := results.RuleReport{Rule: results.Rule{Text: "stalls == 0"}, Unmatched: true}
	for _, tc := range []struct {
		name string
		rep  results.GateReport
		want int
	}{
		{"passed", results.GateReport{Rules: []results.RuleReport{passed}}, exitOK},
		{"a check failed", results.GateReport{Rules: []results.RuleReport{passed, failed}}, exitRegression},
		{"a rule matched no cell", results.GateReport{Rules: []results.RuleReport{failed, unmatched}}, exitUsage},
		{"the sweep failed", results.GateReport{SweepFailed: "partial", Rules: []results.RuleReport{failed, unmatched}}, exitFailed},
	} {
		if got := gateExitCode(&tc.rep); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}
