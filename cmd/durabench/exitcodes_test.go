package main

import (
	"testing"

	"github.com/durabench/durabench/internal/stats"
)

// TestGateExitCode: the gate's exit codes, in their order of precedence.
func TestGateExitCode(t *testing.T) {
	failed := stats.RuleReport{Rule: stats.Rule{Text: "ttls.p50 < 1us"}, Checks: []stats.Check{{Verdict: stats.Fail}}}
	passed := stats.RuleReport{Rule: stats.Rule{Text: "errors == 0"}, Checks: []stats.Check{{Verdict: stats.Pass}}}
	unmatched := stats.RuleReport{Rule: stats.Rule{Text: "stalls == 0"}, Unmatched: true}
	for _, tc := range []struct {
		name string
		rep  stats.GateReport
		want int
	}{
		{"passed", stats.GateReport{Rules: []stats.RuleReport{passed}}, exitOK},
		{"a check failed", stats.GateReport{Rules: []stats.RuleReport{passed, failed}}, exitRegression},
		{"a rule matched no cell", stats.GateReport{Rules: []stats.RuleReport{failed, unmatched}}, exitUsage},
		{"the sweep failed", stats.GateReport{SweepFailed: "partial", Rules: []stats.RuleReport{failed, unmatched}}, exitFailed},
	} {
		if got := gateExitCode(&tc.rep); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}
