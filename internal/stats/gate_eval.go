package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// ErrGateFailed is returned by GateReport.Err when a rule failed (the CLI
// exits 1 on it).
var ErrGateFailed = errors.New("gate failed")

// Verdict is the outcome of one rule on one cell.
type Verdict string

// Verdicts.
const (
	// Pass: the rule holds, or a relative rule's change is over the
	// threshold but not significant (see Check.Note).
	Pass Verdict = "pass"
	// Fail: the rule does not hold (relative rules: over the threshold and
	// significant).
	Fail Verdict = "FAIL"
	// NoBaseline: a relative rule on a cell the baseline lacks; it is
	// reported and does not fail the gate.
	NoBaseline Verdict = "new"
)

// gateOutcome is the gate's overall result. Err reports it as an error the
// CLI maps to its exit code.
type gateOutcome int

const (
	gatePassed      gateOutcome = iota // every rule held
	gateFailed                         // a check failed
	gateUnmatched                      // a rule matched no cell: the configuration is wrong
	gateSweepFailed                    // the head sweep failed (its file is partial or records an error)
)

// GateReport is every rule's verdict on every cell it matched, with the
// figures behind each verdict.
type GateReport struct {
	Head SweepInfo
	// Base is the baseline; HasBaseline is false when none was given.
	Base        SweepInfo
	HasBaseline bool
	// Null is the null sweep (GateNull); HasNull is false without one.
	Null    SweepInfo
	HasNull bool
	// Again is the head swept a second time after the null sweep (ABAB,
	// GateRepeat); HasAgain is false without one.
	Again    SweepInfo
	HasAgain bool
	Alpha    float64
	Rules    []RuleReport
	// SweepFailed, when set, says why the head sweep is not complete: the
	// file is partial or records an error.
	SweepFailed string
	// Warnings name plan settings outside the cell key that differ from the
	// baseline (see Comparison.Warnings).
	Warnings []string
	// Missing lists the baseline's cells the head sweep lacks: nothing
	// checks them, so the reports name them.
	Missing []CellKey
	// Interleave is set when the head and the baseline are the two sides
	// of one interleaved sweep (SplitSides) and some checks are paired.
	Interleave *results.Interleave
}

// RuleReport is one rule's checks.
type RuleReport struct {
	Rule   Rule
	Checks []Check
	// Unmatched is set when the rule matched no cell of the head sweep (and
	// does not AllowEmpty): the gate configuration checks nothing there.
	Unmatched bool
}

// Check is one rule evaluated on one cell. Value, Baseline and Threshold
// are microseconds for metric rules and plain numbers for count rules.
type Check struct {
	Cell    CellKey
	Verdict Verdict
	// Value is the head figure: the statistic or the count.
	Value float64
	// Baseline is the baseline's statistic (relative rules; NaN otherwise
	// or when the baseline lacks the cell).
	Baseline float64
	// Ratio is Value/Baseline (relative rules; NaN otherwise).
	Ratio float64
	// P is the two-sided Mann-Whitney U p-value of the metric's per-run
	// values, base against head (relative rules; NaN otherwise).
	P      float64
	N1, N2 int
	// Statistic and Unit are what the tests ran on (MetricRow.Statistic,
	// MetricRow.Unit): N1 and N2 count runs unless Unit is UnitSample.
	Statistic, Unit string
	// NullRatio is the rule's statistic of the null sweep over the
	// baseline's (relative rules with a null sweep; NaN otherwise). A
	// check fails only when Ratio departs from 1 further than it.
	NullRatio float64
	// RunRatio is, for a metric with several samples per run (tested on
	// one aggregate per run), the median of the head's per-run statistic
	// over the baseline's: the change of the unit the test runs on, next
	// to Ratio, the change of the pooled percentile the rule names (NaN
	// otherwise).
	RunRatio float64
	// PBeyond is the one-sided Mann-Whitney U p-value that the head values
	// lie beyond threshold × the baseline values (relative rules whose
	// ratio is past the threshold; NaN otherwise). Significant is
	// PBeyond < Alpha: with the ratio past the threshold, the check fails.
	PBeyond     float64
	Significant bool
	// Paired is set when the cell and its baseline are an interleaved
	// pair: P, N1 and N2 are then its signed-rank test over the blocks,
	// and PBeyond the one-sided signed-rank test of the log ratios against
	// ln(threshold).
	Paired *Paired
	// MDEPct is the minimum detectable effect of the tested values in
	// percent (relative rules; NaN otherwise): a threshold within it is
	// warned about. +Inf where the rule's test can never reach α at these
	// sizes.
	MDEPct float64
	// Note explains a verdict that the figures alone do not (e.g. "over
	// the threshold but not significant").
	Note string
}

// Passed reports whether the gate passed: every check passed, every rule
// matched a cell, and the head sweep completed.
func (r *GateReport) Passed() bool { return r.outcome() == gatePassed }

// Failed returns the failed checks with their rules.
func (r *GateReport) Failed() []FailedCheck {
	var out []FailedCheck
	for _, rr := range r.Rules {
		for _, c := range rr.Checks {
			if c.Verdict == Fail {
				out = append(out, FailedCheck{Rule: rr.Rule, Check: c})
			}
		}
	}
	return out
}

// FailedCheck is a failed check with its rule.
type FailedCheck struct {
	Rule  Rule
	Check Check
}

// Unmatched returns the rules that matched no cell.
func (r *GateReport) Unmatched() []Rule {
	var out []Rule
	for _, rr := range r.Rules {
		if rr.Unmatched {
			out = append(out, rr.Rule)
		}
	}
	return out
}

// outcome is the gate's result: the head sweep failed (a verdict on
// partial data would mislead), else a rule matched no cell (the
// configuration is wrong), else a check failed, else passed.
func (r *GateReport) outcome() gateOutcome {
	switch {
	case r.SweepFailed != "":
		return gateSweepFailed
	case len(r.Unmatched()) > 0:
		return gateUnmatched
	case len(r.Failed()) > 0:
		return gateFailed
	}
	return gatePassed
}

// Err is nil when the gate passed, else an error matching results.ErrSweepFailed,
// ErrRules or ErrGateFailed, in this order of precedence, that names the
// cause.
func (r *GateReport) Err() error {
	switch r.outcome() {
	case gateSweepFailed:
		return fmt.Errorf("%w: %s", results.ErrSweepFailed, r.SweepFailed)
	case gateUnmatched:
		var names []string
		for _, rule := range r.Unmatched() {
			names = append(names, fmt.Sprintf("%s (%s)", rule.Text, rule.Source))
		}
		return fmt.Errorf("%w: rule matches no cell: %s", ErrRules, strings.Join(names, "; "))
	case gateFailed:
		f := r.Failed()
		return fmt.Errorf("%w: %d check(s) failed, first: %s on %s", ErrGateFailed, len(f), f[0].Rule.Text, f[0].Check.Cell)
	}
	return nil
}

// Gate checks rules against the head sweep, and the relative rules against
// base. An absolute rule holds as written for every cell it matches. A
// relative rule fails on a cell only when its statistic moved past the
// threshold (head/baseline ratio) AND a Mann-Whitney U test on that
// metric's per-run values says so significantly (α = Alpha): the one-sided
// test that the head values lie beyond threshold × the baseline values
// (MannWhitneyBeyond). Noise around the threshold therefore does not fail
// the gate, while a real shift past it does. It returns an
// error matching ErrRules when a relative rule has no baseline to compare
// with, and ErrMethodology when the files are not comparable; everything
// else, including rules that match no cell, is in the report.
func Gate(head, base *results.File, rules []Rule) (*GateReport, error) {
	return GateNull(head, base, nil, rules)
}

// GateNull is Gate with a null sweep: null is a second sweep of the
// baseline (same commit, machine and settings). A relative rule then fails
// only when the head's ratio is past the threshold, the test says so
// significantly, and the ratio departs from 1 further than the null
// sweep's ratio to the baseline (the change an A/A pair shows). null nil
// is Gate.
func GateNull(head, base, null *results.File, rules []Rule) (*GateReport, error) {
	if head == nil {
		return nil, fmt.Errorf("gate: %w: no head results", ErrRules)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("gate: %w: no rules", ErrRules)
	}
	if base == nil {
		for _, r := range rules {
			if r.Relative {
				return nil, fmt.Errorf("%w: %s: %q compares against a baseline; give one (--baseline) or drop the rule", ErrRules, r.Source, r.Text)
			}
		}
	} else if err := checkComparable(base, head); err != nil {
		return nil, err
	}
	if null != nil {
		if base == nil {
			return nil, fmt.Errorf("%w: --null is a second sweep of the baseline; give the baseline too (--baseline)", ErrRules)
		}
		if err := checkNull(base, null); err != nil {
			return nil, err
		}
	}
	rep := &GateReport{Head: sweepInfo(head, "", "head"), Alpha: Alpha}
	switch {
	case head.Error != "":
		rep.SweepFailed = head.Error
	case head.Partial:
		rep.SweepFailed = "the head results are partial: not every planned cell ran"
	}
	var bIdx map[CellKey]*results.Cell
	if base != nil {
		rep.Base, rep.HasBaseline = sweepInfo(base, "", "base"), true
		rep.Warnings = planWarnings(base, head)
		bIdx, _ = indexCells(base)
	}
	var nIdx map[CellKey]*results.Cell
	if null != nil {
		rep.Null, rep.HasNull = sweepInfo(null, "", "null"), true
		for _, w := range planWarnings(base, null) {
			rep.Warnings = append(rep.Warnings, "null sweep: "+w)
		}
		nIdx, _ = indexCells(null)
	}
	pooled := pooledSides{}
	hIdx, hKeys := indexCells(head)
	slices.SortFunc(hKeys, CellKey.cmp)
	for k := range bIdx {
		if hIdx[k] == nil {
			rep.Missing = append(rep.Missing, k)
		}
	}
	slices.SortFunc(rep.Missing, CellKey.cmp)
	tests := testCache{}

	for _, rule := range rules {
		rr := RuleReport{Rule: rule}
		for _, k := range hKeys {
			if !rule.matches(k) {
				continue
			}
			cell := hIdx[k]
			if rule.Count != "" {
				rr.Checks = append(rr.Checks, checkCount(rule, k, cell))
				continue
			}
			mp := metricOf(cell, rule.Metric)
			if mp == nil {
				continue // the selector matched, the metric does not apply here
			}
			m := *mp
			if rule.Stat == FastShareStat {
				rr.Checks = append(rr.Checks, checkShare(rule, k, m, metricOf(bIdx[k], rule.Metric), metricOf(nIdx[k], rule.Metric), rep.Alpha))
				continue
			}
			if rule.Relative {
				bm := metricOf(bIdx[k], rule.Metric)
				nm := metricOf(nIdx[k], rule.Metric)
				pooled.add("head", rule.Metric, testedSample(rule.Metric, m))
				if bm != nil {
					pooled.add("base", rule.Metric, testedSample(rule.Metric, *bm))
				}
				c := checkRelative(rule, k, m, bm, nm, rep.Alpha, tests, bIdx[k], cell)
				if c.Paired != nil {
					rep.Interleave = head.Plan.Interleave
				}
				rr.Checks = append(rr.Checks, c)
			} else {
				rr.Checks = append(rr.Checks, checkAbsolute(rule, k, m))
			}
		}
		rr.Unmatched = len(rr.Checks) == 0 && !rule.AllowEmpty
		if w := thresholdWarning(rule, rr.Checks); w != "" {
			rep.Warnings = append(rep.Warnings, w)
		}
		rep.Rules = append(rep.Rules, rr)
	}
	rep.Warnings = append(rep.Warnings, pooled.warnings()...)
	return rep, nil
}

// metricOf returns the metric name of cell, nil when either is missing. A
// critical-path category is a metric too (critical_path.queue_wait:
// results.Cell.PathMetric).
func metricOf(cell *results.Cell, name string) *results.Metric {
	if cell == nil {
		return nil
	}
	if m, ok := cell.Metrics[name]; ok {
		return &m
	}
	if m, ok := cell.PathMetric(name); ok {
		return &m
	}
	return nil
}

func newCheck(k CellKey) Check {
	return Check{Cell: k, Baseline: math.NaN(), Ratio: math.NaN(), P: math.NaN(), PBeyond: math.NaN(), NullRatio: math.NaN(), RunRatio: math.NaN(),
		MDEPct: math.NaN()}
}

func checkCount(rule Rule, k CellKey, cell *results.Cell) Check {
	c := newCheck(k)
	switch rule.Count {
	case "stalls":
		c.Value = float64(cell.Stalls)
		if cell.Stalls > 0 {
			c.Note = stalledNote(cell.StalledRuns)
		}
	case "errors":
		c.Value = float64(cell.Errors)
		if len(cell.FailedRuns) > 0 {
			c.Note = fmt.Sprintf("first: %s: %s", cell.FailedRuns[0].Run, cell.FailedRuns[0].Error)
		}
	case "runs":
		c.Value = float64(cell.Runs)
	}
	c.Verdict = Fail
	if holds(c.Value, rule.Op, rule.Threshold) {
		c.Verdict, c.Note = Pass, ""
	}
	return c
}

// stalledNote names up to three stalled runs with their TTLS.
func stalledNote(runs []results.StalledRun) string {
	var parts []string
	for i, r := range runs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(runs)-3))
			break
		}
		var s string
		switch {
		case r.NotStarted:
			s = r.Run + " (not started before the cell timeout)"
		case !r.Finished:
			s = fmt.Sprintf("%s %s (unfinished)", r.Run, metrics.FormatMicros(r.TTLSMS*1000))
		default:
			s = fmt.Sprintf("%s %s", r.Run, metrics.FormatMicros(r.TTLSMS*1000))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func checkAbsolute(rule Rule, k CellKey, m results.Metric) Check {
	c := newCheck(k)
	if m.Count == 0 {
		c.Verdict, c.Note = Fail, "no values"
		return c
	}
	c.Value = statOf(m, rule.Stat)
	c.Verdict = Fail
	if holds(c.Value, rule.Op, rule.Threshold) {
		c.Verdict = Pass
	}
	return c
}

// testCache holds the two-sided test of a cell's metric, which every rule
// on that metric shares (p50 and p90 rules test the same samples).
type testCache map[testKey]Significance

type testKey struct {
	cell   CellKey
	metric string
}

// thresholdWarning is the warning of a relative rule whose threshold is
// within the minimum detectable effect of cells it checked (mdeWarning);
// "" when it is not.
func thresholdWarning(rule Rule, checks []Check) string {
	if !rule.Relative || rule.Stat == FastShareStat {
		return ""
	}
	margin := math.Abs(rule.Threshold-1) * 100
	var cells []string
	var mdes []float64
	keys := make([]CellKey, len(checks))
	for i, c := range checks {
		keys[i] = c.Cell
	}
	labels, _ := cellLabels(keys)
	for i, c := range checks {
		if !math.IsNaN(c.MDEPct) && margin < c.MDEPct {
			cells, mdes = append(cells, labels[i]), append(mdes, c.MDEPct)
		}
	}
	return mdeWarning(rule, cells, mdes)
}

func checkRelative(rule Rule, k CellKey, m results.Metric, base, null *results.Metric, alpha float64, tests testCache, bcell, hcell *results.Cell) Check {
	c := newCheck(k)
	if m.Count == 0 {
		c.Verdict, c.Note = Fail, "no values"
		return c
	}
	c.Value = statOf(m, rule.Stat)
	if base == nil || base.Count == 0 {
		c.Verdict, c.Note = NoBaseline, "not in the baseline"
		return c
	}
	c.Baseline = statOf(*base, rule.Stat)
	switch {
	case c.Baseline > 0:
		c.Ratio = c.Value / c.Baseline
	case c.Value == c.Baseline:
		c.Ratio = 1
	default:
		c.Ratio = math.Inf(1)
	}
	bt, ht := testedSample(rule.Metric, *base), testedSample(rule.Metric, m)
	c.Statistic, c.Unit = ht.stat, ht.unit
	if bt.unit == UnitSample {
		c.Statistic, c.Unit = bt.stat, bt.unit
	}
	t, ok := tests[testKey{k, rule.Metric}]
	// The test that decides a directed rule is one-sided (pairedBeyond,
	// MannWhitneyBeyond): its MDE is +Inf only where that test, not the
	// two-sided one, can never reach alpha.
	sides := 1
	if rule.Op == "==" || rule.Op == "!=" {
		sides = 2
	}
	if pt, paired := pairedOf(bcell, hcell, rule.Metric, alpha); paired && pt.N > 0 {
		c.Paired, c.MDEPct = &pt, pt.MDEPct
		if pt.Rounds == 0 { // the signed-rank test's, at this rule's sides
			c.MDEPct = mdePaired(pt.SD, pt.N, alpha, sides)
		}
		t = Significance{P: pt.P, Alpha: alpha, N1: pt.N, N2: pt.N, Significant: pt.Significant, Warnings: pt.Warnings}
	} else {
		if !ok {
			t = MannWhitney(bt.values, ht.values, alpha)
			tests[testKey{k, rule.Metric}] = t
		}
		c.MDEPct = mdeOf(bt.values, ht.values, alpha, sides)
	}
	c.P, c.N1, c.N2 = t.P, t.N1, t.N2
	if c.Statistic != string(metrics.RunValue) && c.Unit == UnitRun && len(bt.values) > 0 && len(ht.values) > 0 {
		if bmed := medianOf(bt.values); bmed > 0 {
			c.RunRatio = medianOf(ht.values) / bmed
		}
	}
	if null != nil && null.Count > 0 {
		nv := statOf(*null, rule.Stat)
		switch {
		case c.Baseline > 0:
			c.NullRatio = nv / c.Baseline
		case nv == c.Baseline:
			c.NullRatio = 1
		}
	}
	if holds(c.Ratio, rule.Op, rule.Threshold) {
		c.Verdict = Pass
		return c
	}
	// Past the threshold: fail only when the head sample lies significantly
	// beyond threshold × baseline, so a change near the threshold that
	// noise can explain does not fail the gate.
	var decisive Significance
	switch {
	case c.Paired != nil && rule.Op != "==" && rule.Op != "!=":
		// Paired: the blocks' log ratios lie beyond ln(threshold).
		above := rule.Op == "<" || rule.Op == "<="
		p, n := pairedBeyond(bcell, hcell, rule.Metric, rule.Threshold, above)
		decisive = Significance{P: p, Alpha: alpha, N1: n, N2: n, Significant: p < alpha}
	case rule.Op == "<" || rule.Op == "<=":
		decisive = MannWhitneyBeyond(bt.values, ht.values, rule.Threshold, true, alpha)
	case rule.Op == ">" || rule.Op == ">=":
		decisive = MannWhitneyBeyond(bt.values, ht.values, rule.Threshold, false, alpha)
	default: // == and != have no direction: the plain two-sided test decides
		decisive = t
	}
	c.PBeyond, c.Significant = decisive.P, decisive.Significant
	if c.Significant && !math.IsNaN(c.NullRatio) && math.Abs(c.Ratio-1) <= math.Abs(c.NullRatio-1) {
		c.Verdict = Pass
		c.Note = fmt.Sprintf("past the threshold and significant, but within the null sweep's spread (null %.2fx)", c.NullRatio)
		return c
	}
	if c.Significant {
		c.Verdict = Fail
		return c
	}
	c.Verdict = Pass
	c.Note = fmt.Sprintf("past the threshold but not significantly (p=%.3f ≥ α=%g)", decisive.P, alpha)
	if len(decisive.Warnings) > 0 {
		c.Note += "; " + strings.Join(decisive.Warnings, "; ")
	}
	return c
}

// checkShare checks a fast_share rule: the percentage of the cell's runs
// under FastFactor × the fastest run of the head and the baseline (the
// head alone without one). An absolute rule holds as written. A relative
// rule ("baseline - 20pp") fails only when the head's share is past the
// baseline's share moved by the threshold, Fisher's exact test on the
// two sides' counts is significant (runs are independent), and, with a
// null sweep, the head's share departs from the baseline's further than
// the null sweep's does. Value and Baseline are percentages.
func checkShare(rule Rule, k CellKey, m results.Metric, base, null *results.Metric, alpha float64) Check {
	c := newCheck(k)
	if len(m.Values) == 0 {
		c.Verdict, c.Note = Fail, "no values"
		return c
	}
	fastest := slices.Min(m.Values)
	if base != nil && len(base.Values) > 0 {
		fastest = min(fastest, slices.Min(base.Values))
	}
	under := fastThreshold(fastest)
	count := func(vs []int64) int { return fastCount(vs, under) }
	hf, hn := count(m.Values), len(m.Values)
	c.Value, c.N2 = 100*float64(hf)/float64(hn), hn
	c.Statistic, c.Unit = FastShareStatistic, UnitRun
	note := fmt.Sprintf("%d/%d runs under %s", hf, hn, metrics.FormatMicros(under))
	if !rule.Relative {
		c.Verdict, c.Note = Fail, note
		if holds(c.Value, rule.Op, rule.Threshold) {
			c.Verdict = Pass
		}
		return c
	}
	if base == nil || len(base.Values) == 0 {
		c.Verdict, c.Note = NoBaseline, "not in the baseline"
		return c
	}
	bf, bn := count(base.Values), len(base.Values)
	c.Baseline, c.N1 = 100*float64(bf)/float64(bn), bn
	c.P = FisherExact(bf, bn-bf, hf, hn-hf)
	c.Significant = c.P < alpha
	c.Note = fmt.Sprintf("%d/%d → %d/%d runs under %s", bf, bn, hf, hn, metrics.FormatMicros(under))
	if holds(c.Value, rule.Op, c.Baseline+rule.Threshold) {
		c.Verdict = Pass
		return c
	}
	if !c.Significant {
		c.Verdict = Pass
		c.Note += fmt.Sprintf("; past the threshold but not significantly (p=%.3f ≥ α=%g)", c.P, alpha)
		return c
	}
	if null != nil && len(null.Values) > 0 {
		nf, nn := count(null.Values), len(null.Values)
		nullShare := 100 * float64(nf) / float64(nn)
		if math.Abs(c.Value-c.Baseline) <= math.Abs(nullShare-c.Baseline) {
			c.Verdict = Pass
			c.Note += fmt.Sprintf("; past the threshold and significant, but within the null sweep's spread (null %d/%d)", nf, nn)
			return c
		}
		c.Note += fmt.Sprintf("; null %d/%d", nf, nn)
	}
	c.Verdict = Fail
	return c
}

// medianOf is the median of vs (not empty).
func medianOf(vs []int64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}

// statOf returns the named statistic of m's summary, in microseconds.
func statOf(m results.Metric, stat string) float64 {
	switch stat {
	case "min":
		return float64(m.Min)
	case "p50":
		return float64(m.P50)
	case "p75":
		return float64(m.P75)
	case "p90":
		return float64(m.P90)
	case "p99":
		return float64(m.P99)
	case "max":
		return float64(m.Max)
	case "mean":
		return m.Mean
	}
	return math.NaN()
}
