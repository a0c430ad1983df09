package stats

import (
	"fmt"
	"slices"

	"github.com/durabench/durabench/results"
)

// GateRepeat gates an ABAB job: base, head, null (the baseline again) and
// again (the head again), swept in this order. It gates two pairs, each
// against the baseline sweep next to it and with the other baseline sweep
// as its null: base → head (null: null) and null → again (null: base). A
// relative rule fails a cell only when it fails in both pairs — a change
// the second pair does not repeat is one environment draw, not the code.
// An absolute or count rule (a latency bound, stalls == 0) fails when it
// fails on either head: each head's runs are real runs. The report is the
// first pair's figures; a check whose second-pair verdict differs says so
// in its note, and a check that failed on the second head alone carries
// that head's figures.
func GateRepeat(head, base, null, again *results.File, rules []Rule) (*GateReport, error) {
	if null == nil || again == nil {
		return nil, fmt.Errorf("%w: a repeated head (ABAB) needs the null sweep and the second head", ErrRules)
	}
	first, err := GateNull(head, base, null, rules)
	if err != nil {
		return nil, err
	}
	second, err := GateNull(again, null, base, rules)
	if err != nil {
		return nil, fmt.Errorf("the second pair (null → second head): %w", err)
	}
	first.Again, first.HasAgain = sweepInfo(again, "", "head 2"), true
	if first.SweepFailed == "" && second.SweepFailed != "" {
		first.SweepFailed = "second head: " + second.SweepFailed
	}
	for _, w := range second.Warnings {
		if !slices.Contains(first.Warnings, w) {
			first.Warnings = append(first.Warnings, "second pair: "+w)
		}
	}
	for _, k := range second.Missing {
		if !slices.Contains(first.Missing, k) {
			first.Missing = append(first.Missing, k)
		}
	}
	slices.SortFunc(first.Missing, CellKey.cmp)
	for i := range first.Rules {
		rr, rr2 := &first.Rules[i], second.Rules[i]
		rr.Unmatched = rr.Unmatched || rr2.Unmatched
		byCell := map[CellKey]Check{}
		for _, c := range rr2.Checks {
			byCell[c.Cell] = c
		}
		for j := range rr.Checks {
			c := &rr.Checks[j]
			c2, ok := byCell[c.Cell]
			delete(byCell, c.Cell)
			if !ok {
				if c.Verdict == Fail && rr.Rule.Relative {
					c.Verdict, c.Note = Pass, joinNote(c.Note, "not repeated: the second head lacks the cell")
				}
				continue
			}
			c.Note = mergeNote(rr.Rule, *c, c2)
			switch {
			case rr.Rule.Relative && c.Verdict == Fail && c2.Verdict != Fail:
				c.Verdict = Pass
			case !rr.Rule.Relative && c.Verdict != Fail && c2.Verdict == Fail:
				note := c.Note
				*c = c2
				c.Note = note
			}
		}
		// Cells only the second head has: its absolute and count checks
		// count; a relative check there has no first pair to repeat.
		for _, c2 := range rr2.Checks {
			if _, left := byCell[c2.Cell]; !left {
				continue
			}
			if rr.Rule.Relative && c2.Verdict == Fail {
				c2.Verdict = Pass
				c2.Note = joinNote(c2.Note, "second pair only: not in the first head")
			} else {
				c2.Note = joinNote(c2.Note, "second head only")
			}
			rr.Checks = append(rr.Checks, c2)
		}
	}
	return first, nil
}

// mergeNote is the first pair's note with the second pair's verdict when it
// differs.
func mergeNote(rule Rule, c, c2 Check) string {
	if c.Verdict == c2.Verdict {
		return c.Note
	}
	var s string
	switch {
	case rule.Relative && c.Verdict == Fail:
		s = "not repeated: the second pair passed (" + pairFigures(c2) + ")"
		if c2.Verdict == NoBaseline {
			s = "not repeated: the second pair has no baseline"
		}
	case rule.Relative:
		s = fmt.Sprintf("the second pair alone failed (%s): not repeated", pairFigures(c2))
	case c2.Verdict == Fail:
		s = "FAIL on the second head"
		if c2.Note != "" {
			s += ": " + c2.Note
		}
		return s // c becomes c2, whose figures these are
	default:
		s = "the second head passed; the first did not"
	}
	return joinNote(c.Note, s)
}

func pairFigures(c Check) string {
	if isNaN(c.Ratio) { // a fast_share rule: shares and Fisher's p
		return fmt.Sprintf("%.0f%% against %.0f%%, p=%.3f", c.Value, c.Baseline, c.P)
	}
	s := fmt.Sprintf("%.3fx", c.Ratio)
	if !isNaN(c.PBeyond) {
		s += fmt.Sprintf(", beyond: p=%.3f", c.PBeyond)
	}
	return s
}

func isNaN(f float64) bool { return f != f }

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
