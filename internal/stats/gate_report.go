package stats

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/durabench/durabench/metrics"
)

// pairedNote says how paired checks were tested; "" when none is.
func (r *GateReport) pairedNote() string {
	in := r.Interleave
	if in == nil {
		return ""
	}
	if in.Rounds > 1 {
		return fmt.Sprintf("paired: one interleaved sweep, %s %s (baseline) against %s (head) run by run in %s blocks, in %d rounds on processes started afresh; a relative rule's tests are Student's t across the rounds of each round's estimate of its blocks' log ratios (two-sided p; beyond: one-sided, against ln(threshold)).",
			in.Dimension, in.A, in.B, in.Order, in.Rounds)
	}
	return fmt.Sprintf("paired: one interleaved sweep, %s %s (baseline) against %s (head) run by run in %s blocks; a relative rule's tests are the Wilcoxon signed-rank tests of the blocks' log ratios (two-sided p; beyond: one-sided, against ln(threshold)).",
		in.Dimension, in.A, in.B, in.Order)
}

// headline is the one-line outcome of the gate.
func (r *GateReport) headline() string {
	checks := 0
	for _, rr := range r.Rules {
		checks += len(rr.Checks)
	}
	failed := len(r.Failed())
	switch r.outcome() {
	case gateSweepFailed:
		return fmt.Sprintf("NOT GATED: the head sweep failed (%s); %d of %d checks failed on what it measured", r.SweepFailed, failed, checks)
	case gateUnmatched:
		return fmt.Sprintf("CONFIGURATION ERROR: %d rule(s) match no cell; %d of %d checks failed", len(r.Unmatched()), failed, checks)
	case gateFailed:
		return fmt.Sprintf("FAIL: %d of %d checks failed (%d rules)", failed, checks, len(r.Rules))
	}
	return fmt.Sprintf("PASS: %d checks, %d rules", checks, len(r.Rules))
}

func (r *GateReport) sides() string {
	s := "head"
	if r.Head.Label != "head" {
		s += " " + r.Head.Label
	}
	if r.HasBaseline {
		s += " vs baseline"
		if r.Base.Label != "base" {
			s += " " + r.Base.Label
		}
	}
	if r.HasNull {
		s += ", null sweep"
		if r.Null.Label != "null" {
			s += " " + r.Null.Label
		}
	}
	if r.HasAgain {
		s += ", head again (ABAB: a relative rule fails only when both pairs fail)"
	}
	return s
}

func (r *GateReport) labels() map[CellKey]string {
	seen := map[CellKey]bool{}
	var keys []CellKey
	for _, rr := range r.Rules {
		for _, c := range rr.Checks {
			if !seen[c.Cell] {
				seen[c.Cell] = true
				keys = append(keys, c.Cell)
			}
		}
	}
	labels, _ := cellLabels(keys)
	return labelMap(keys, labels)
}

// WriteText renders the report for a terminal or CI log: the outcome, then
// every rule with its verdict and every cell it checked, with the value,
// the baseline, the ratio and the p-value behind each verdict.
func (r *GateReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "gate: %s (α = %g)\n%s\n", r.sides(), r.Alpha, r.headline())
	if note := r.pairedNote(); note != "" {
		fmt.Fprintln(bw, note)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(bw, "warning: %s\n", w)
	}
	label := r.labels()
	for _, rr := range r.Rules {
		fmt.Fprintf(bw, "\n%-4s  %s  (%s)%s\n", ruleVerdict(rr), rr.Rule.Text, rr.Rule.Source, ruleSummary(rr))
		t := alignedTable{align: "llrrrll"}
		for _, c := range rr.Checks {
			t.add("     "+string(c.Verdict), label[c.Cell], checkValue(rr.Rule, c), checkBaseline(rr.Rule, c), ratioCell(c), pCell(c), c.Note)
		}
		t.write(bw, "  ")
	}
	writeOneSided(bw, "only in the baseline", r.Missing, "")
	return bw.Flush()
}

// WriteMarkdown renders the report for a pull-request comment: the outcome,
// the failed checks in a table, and every check in a collapsed section.
func (r *GateReport) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	mark := "✅"
	if !r.Passed() {
		mark = "❌"
	}
	fmt.Fprintf(bw, "**Gate %s %s**  \n%s, α = %g. A relative rule fails only when the change is past its threshold and significantly so (Mann-Whitney U, one-sided, head against threshold × baseline: the \"beyond\" p), tested on runs (n counts runs; a metric with several samples per run on one aggregate per run)", mark, mdEscape(r.headline()), mdEscape(r.sides()), r.Alpha)
	if r.HasNull {
		bw.WriteString(", and beyond the null sweep's ratio to the baseline (the `null` ratio: what an A/A pair shows)")
	}
	if note := r.pairedNote(); note != "" {
		bw.WriteString(". " + note[:len(note)-1])
	}
	for _, rr := range r.Rules {
		if rr.Rule.Stat == FastShareStat && rr.Rule.Relative {
			bw.WriteString("; a `fast_share` rule tests the counts of fast runs with Fisher's exact test")
			break
		}
	}
	bw.WriteString(".\n")
	if len(r.Warnings) > 0 {
		fmt.Fprintln(bw)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(bw, "- ⚠️ %s\n", mdEscape(w))
	}
	label := r.labels()
	if u := r.Unmatched(); len(u) > 0 {
		fmt.Fprintf(bw, "\nRules that match no cell (fix the rules file):\n")
		for _, rule := range u {
			fmt.Fprintf(bw, "- `%s` (%s)\n", rule.Text, rule.Source)
		}
	}
	if f := r.Failed(); len(f) > 0 {
		fmt.Fprintf(bw, "\n| rule | cell | value | baseline | ratio | p | note |\n|---|---|--:|--:|--:|--:|---|\n")
		for _, fc := range f {
			c := fc.Check
			fmt.Fprintf(bw, "| `%s` | %s | %s | %s | %s | %s | %s |\n", mdEscape(fc.Rule.Text), mdEscape(label[c.Cell]),
				checkValue(fc.Rule, c), checkBaseline(fc.Rule, c), ratioCell(c), pCell(c), mdEscape(c.Note))
		}
	}
	checks := 0
	for _, rr := range r.Rules {
		checks += len(rr.Checks)
	}
	fmt.Fprintf(bw, "\n<details><summary>All %d checks of %d rules</summary>\n\n", checks, len(r.Rules))
	fmt.Fprintf(bw, "| verdict | rule | cell | value | baseline | ratio | p | note |\n|---|---|---|--:|--:|--:|--:|---|\n")
	for _, rr := range r.Rules {
		if len(rr.Checks) == 0 {
			v := "skipped"
			if rr.Unmatched {
				v = "**no cell**"
			}
			fmt.Fprintf(bw, "| %s | `%s` | | | | | | |\n", v, mdEscape(rr.Rule.Text))
		}
		for _, c := range rr.Checks {
			v := string(c.Verdict)
			if c.Verdict == Fail {
				v = "**FAIL**"
			}
			fmt.Fprintf(bw, "| %s | `%s` | %s | %s | %s | %s | %s | %s |\n", v, mdEscape(rr.Rule.Text), mdEscape(label[c.Cell]),
				checkValue(rr.Rule, c), checkBaseline(rr.Rule, c), ratioCell(c), pCell(c), mdEscape(c.Note))
		}
	}
	fmt.Fprintf(bw, "\n</details>\n")
	writeOneSided(bw, "Only in the baseline", r.Missing, "- ")
	return bw.Flush()
}

func ruleVerdict(rr RuleReport) string {
	if rr.Unmatched {
		return "ERR"
	}
	for _, c := range rr.Checks {
		if c.Verdict == Fail {
			return string(Fail)
		}
	}
	if len(rr.Checks) == 0 {
		return "skip"
	}
	return string(Pass)
}

func ruleSummary(rr RuleReport) string {
	switch {
	case rr.Unmatched:
		return ": matches no cell of the head sweep"
	case len(rr.Checks) == 0:
		return ": no cell has this metric (skipped)"
	}
	failed := 0
	for _, c := range rr.Checks {
		if c.Verdict == Fail {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Sprintf(": %d of %d cells failed", failed, len(rr.Checks))
	}
	return fmt.Sprintf(": %d cells", len(rr.Checks))
}

func figure(rule Rule, v float64) string {
	if rule.Count != "" {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if rule.Stat == FastShareStat {
		return fmt.Sprintf("%.0f%%", v)
	}
	return metrics.FormatMicros(v)
}

func checkValue(rule Rule, c Check) string {
	if c.Note == "no values" {
		return "—"
	}
	return figure(rule, c.Value)
}

func checkBaseline(rule Rule, c Check) string {
	if !rule.Relative {
		return ""
	}
	if math.IsNaN(c.Baseline) {
		return "—"
	}
	return "base " + figure(rule, c.Baseline)
}

func ratioCell(c Check) string {
	if math.IsNaN(c.Ratio) {
		return ""
	}
	if math.IsInf(c.Ratio, 1) {
		return "∞x"
	}
	s := fmt.Sprintf("%.3fx", c.Ratio)
	if !math.IsNaN(c.NullRatio) {
		s += fmt.Sprintf(" (null %.3fx)", c.NullRatio)
	}
	if !math.IsNaN(c.RunRatio) {
		s += fmt.Sprintf(" (per run %.3fx)", c.RunRatio)
	}
	return s
}

func pCell(c Check) string {
	if math.IsNaN(c.P) {
		return ""
	}
	mde := ""
	if !math.IsNaN(c.MDEPct) {
		mde = ", MDE " + FormatMDE(c.MDEPct)
	}
	if p := c.Paired; p != nil {
		lo, hi := p.CIPct()
		s := fmt.Sprintf("paired Δ %+.1f%% [%+.1f, %+.1f]%s, p=%.3f n=%d pairs%s%s", p.DeltaPct(), lo, hi, p.Coverage(Alpha), c.P, p.N, inRounds(p), mde)
		if !math.IsNaN(c.PBeyond) {
			s += fmt.Sprintf(", beyond: p=%.3f", c.PBeyond)
		}
		return s
	}
	s := fmt.Sprintf("p=%.3f", c.P)
	if c.N1 == c.N2 {
		s += fmt.Sprintf(" n=%d", c.N1)
	} else {
		s += fmt.Sprintf(" n=%d+%d", c.N1, c.N2)
	}
	if c.Unit == UnitSample {
		s += " pooled samples"
	}
	s += mde
	if !math.IsNaN(c.PBeyond) {
		s += fmt.Sprintf(", beyond: p=%.3f", c.PBeyond)
	}
	return s
}
