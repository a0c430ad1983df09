package stats

import (
	"encoding/json"
	"io"
	"math"
	"time"

	"github.com/durabench/durabench/results"
)

// JSONSchema names the documents WriteJSON writes (compare and gate).
const (
	CompareJSONSchema = "durabench/compare/v1"
	GateJSONSchema    = "durabench/gate/v1"
)

// num is a float that encodes NaN and ±Inf as null.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

type jsonSweep struct {
	Label            string    `json:"label"`
	Commit           string    `json:"commit,omitempty"`
	DurabenchVersion string    `json:"durabench_version,omitempty"`
	StartedAt        time.Time `json:"started_at,omitzero"`
	VirtualTime      bool      `json:"virtual_time,omitempty"`
	Partial          bool      `json:"partial,omitempty"`
	Error            string    `json:"error,omitempty"`
}

func jsonSweepOf(s SweepInfo) *jsonSweep {
	return &jsonSweep{s.Label, s.Commit, s.DurabenchVersion, s.StartedAt, s.VirtualTime, s.Partial, s.Error}
}

type jsonCompareRow struct {
	Metric string `json:"metric"`
	Cell   string `json:"cell"`
	// Unit is what one tested value is: "run" (or "sample" for an older
	// file without per-run aggregates).
	Unit      string `json:"unit"`
	Statistic string `json:"statistic"`
	NBase     int    `json:"n_base"`
	NHead     int    `json:"n_head"`
	// Medians of the tested statistic, µs.
	Base     num    `json:"base"`
	Head     num    `json:"head"`
	P        num    `json:"p"`
	DeltaPct num    `json:"delta_pct"`
	NullPct  num    `json:"null_delta_pct"`
	Verdict  string `json:"verdict"`
	// MDEPct is the minimum detectable effect (α, power 0.8) in percent;
	// null where there is none: too few runs for the test ever to reach
	// α, or a side with fewer than 2 values.
	MDEPct num `json:"mde_pct"`
	// Paired is the paired test of an interleaved pair's two cells (p and
	// delta_pct above are then its).
	Paired *jsonPaired `json:"paired,omitempty"`
}

// jsonPaired is a paired comparison (Paired): the blocks' log ratios
// tested with the Wilcoxon signed-rank test, the Hodges–Lehmann estimate
// of the ratio with its confidence interval.
type jsonPaired struct {
	Test     string `json:"test"`
	Interval string `json:"interval"`
	N        int    `json:"n_pairs"`
	Ratio    num    `json:"ratio"`
	DeltaPct num    `json:"delta_pct"`
	CILoPct  num    `json:"ci_lo_pct"`
	CIHiPct  num    `json:"ci_hi_pct"`
	// Coverage is the interval's actual confidence (the signed-rank
	// distribution is discrete).
	Coverage num  `json:"ci_coverage"`
	P        num  `json:"p"`
	Exact    bool `json:"exact"`
	// SDLogRatio is the standard deviation of the log ratios the MDE is
	// computed from.
	SDLogRatio num `json:"sd_log_ratio"`
	MDEPct     num `json:"mde_pct"`
	// Rounds, when set, is the number of rounds the test is across
	// (sweep --rounds): test is then "student t across rounds" on each
	// round's Hodges–Lehmann estimate, interval the t interval, and
	// sd_log_ratio the rounds' estimates' spread.
	Rounds int `json:"rounds,omitempty"`
}

func jsonPairedOf(p *Paired) *jsonPaired {
	if p == nil {
		return nil
	}
	lo, hi := p.CIPct()
	test, interval := "wilcoxon signed-rank", "hodges-lehmann"
	if p.Rounds > 0 {
		test, interval = "student t across rounds", "t"
	}
	return &jsonPaired{Test: test, Interval: interval, N: p.N, Ratio: num(p.Ratio),
		DeltaPct: num(p.DeltaPct()), CILoPct: num(lo), CIHiPct: num(hi), Coverage: num(p.Achieved), P: num(p.P),
		Exact: p.Exact, SDLogRatio: num(p.SD), MDEPct: num(p.MDEPct), Rounds: p.Rounds}
}

type jsonShare struct {
	Metric      string  `json:"metric"`
	Cell        string  `json:"cell"`
	Unit        string  `json:"unit"`
	Statistic   string  `json:"statistic"`
	ThresholdUS float64 `json:"threshold_us"`
	BaseFast    int     `json:"base_fast"`
	NBase       int     `json:"n_base"`
	HeadFast    int     `json:"head_fast"`
	NHead       int     `json:"n_head"`
	DeltaPP     float64 `json:"delta_pp"`
	P           num     `json:"p"`
	Verdict     string  `json:"verdict"`
}

type jsonCount struct {
	Cell string      `json:"cell"`
	Base *CellCounts `json:"base"`
	Head *CellCounts `json:"head"`
}

// WriteJSON writes the comparison as one JSON document (schema
// CompareJSONSchema): every row with its metric, cell, unit, sizes,
// statistic tested, p-value, Δ, null Δ and verdict, so CI reads the
// verdict instead of the text. NaN figures are null.
func (c *Comparison) WriteJSON(w io.Writer) error {
	doc := struct {
		Schema string     `json:"schema"`
		Base   *jsonSweep `json:"base"`
		Head   *jsonSweep `json:"head"`
		Null   *jsonSweep `json:"null,omitempty"`
		// Interleave is the interleaved sweep whose two sides are
		// compared (rows with "paired").
		Interleave *results.Interleave `json:"interleave,omitempty"`
		Alpha      float64             `json:"alpha"`
		Confidence float64             `json:"confidence"`
		Warnings   []string            `json:"warnings"`
		Rows       []jsonCompareRow    `json:"rows"`
		// Shares are the fast-mode shares of bimodal metrics (TTFS).
		Shares   []jsonShare `json:"shares"`
		Counts   []jsonCount `json:"counts"`
		OnlyBase []string    `json:"only_base"`
		OnlyHead []string    `json:"only_head"`
	}{
		Schema: CompareJSONSchema, Base: jsonSweepOf(c.Base), Head: jsonSweepOf(c.Head), Interleave: c.Interleave,
		Alpha: c.Alpha, Confidence: c.Confidence, Warnings: nonNil(c.Warnings),
		Rows: []jsonCompareRow{}, Shares: []jsonShare{}, Counts: []jsonCount{}, OnlyBase: keyStrings(c.OnlyBase), OnlyHead: keyStrings(c.OnlyHead),
	}
	if c.HasNull {
		doc.Null = jsonSweepOf(c.Null)
	}
	for _, m := range c.Metrics {
		for _, r := range m.Rows {
			row := jsonCompareRow{
				Metric: m.Metric, Cell: r.Cell.String(), Unit: r.Unit, Statistic: r.Statistic,
				NBase: r.Base.N, NHead: r.Head.N, Base: num(math.NaN()), Head: num(math.NaN()),
				P: num(r.Test.P), DeltaPct: num(r.DeltaPct), NullPct: num(r.NullDeltaPct), Verdict: r.Verdict,
				MDEPct: num(r.MDEPct), Paired: jsonPairedOf(r.Paired),
			}
			if r.InBase && r.Base.N > 0 {
				row.Base = num(r.Base.Median)
			}
			if r.InHead && r.Head.N > 0 {
				row.Head = num(r.Head.Median)
			}
			doc.Rows = append(doc.Rows, row)
		}
	}
	for _, m := range c.Metrics {
		for _, r := range m.Shares {
			v := VerdictSame
			switch {
			case r.Significant && r.DeltaPP < 0:
				v = VerdictWorse // fewer runs in the fast mode
			case r.Significant:
				v = VerdictBetter
			}
			doc.Shares = append(doc.Shares, jsonShare{Metric: m.Metric, Cell: r.Cell.String(), Unit: UnitRun,
				Statistic: FastShareStatistic, ThresholdUS: r.ThresholdUS,
				BaseFast: r.BaseFast, NBase: r.BaseN, HeadFast: r.HeadFast, NHead: r.HeadN, DeltaPP: r.DeltaPP, P: num(r.P), Verdict: v})
		}
	}
	for _, r := range c.Counts {
		jc := jsonCount{Cell: r.Cell.String()}
		if r.InBase {
			b := r.Base
			jc.Base = &b
		}
		if r.InHead {
			h := r.Head
			jc.Head = &h
		}
		doc.Counts = append(doc.Counts, jc)
	}
	return writeIndented(w, doc)
}

type jsonCheck struct {
	Cell      string `json:"cell"`
	Verdict   string `json:"verdict"`
	Unit      string `json:"unit,omitempty"`
	Statistic string `json:"statistic,omitempty"`
	NBase     int    `json:"n_base,omitempty"`
	NHead     int    `json:"n_head,omitempty"`
	Value     num    `json:"value"`
	Baseline  num    `json:"baseline"`
	Ratio     num    `json:"ratio"`
	NullRatio num    `json:"null_ratio"`
	RunRatio  num    `json:"run_ratio"`
	P         num    `json:"p"`
	PBeyond   num    `json:"p_beyond"`
	// MDEPct is the tested values' minimum detectable effect in percent
	// (relative rules; null where there is none, as in a comparison's);
	// Paired the paired test of an interleaved pair.
	MDEPct num         `json:"mde_pct"`
	Paired *jsonPaired `json:"paired,omitempty"`
	Note   string      `json:"note,omitempty"`
}

type jsonRule struct {
	Rule      string      `json:"rule"`
	Source    string      `json:"source"`
	Unmatched bool        `json:"unmatched,omitempty"`
	Checks    []jsonCheck `json:"checks"`
}

// WriteJSON writes the gate's verdicts as one JSON document (schema
// GateJSONSchema): the outcome, and per rule every check with its cell,
// verdict, figures, unit, sizes, statistic tested, p-values and null
// ratio. NaN figures are null; ratios and values of metric rules are µs.
func (r *GateReport) WriteJSON(w io.Writer) error {
	outcome := map[gateOutcome]string{gatePassed: "passed", gateFailed: "failed", gateUnmatched: "unmatched rules", gateSweepFailed: "sweep failed"}[r.outcome()]
	doc := struct {
		Schema  string     `json:"schema"`
		Passed  bool       `json:"passed"`
		Outcome string     `json:"outcome"`
		Head    *jsonSweep `json:"head"`
		Base    *jsonSweep `json:"base,omitempty"`
		Null    *jsonSweep `json:"null,omitempty"`
		Again   *jsonSweep `json:"head_again,omitempty"`
		// Interleave is the interleaved sweep whose sides are gated.
		Interleave  *results.Interleave `json:"interleave,omitempty"`
		Alpha       float64             `json:"alpha"`
		SweepFailed string              `json:"sweep_failed,omitempty"`
		Warnings    []string            `json:"warnings"`
		Missing     []string            `json:"missing"`
		Rules       []jsonRule          `json:"rules"`
	}{
		Schema: GateJSONSchema, Passed: r.Passed(), Outcome: outcome, Head: jsonSweepOf(r.Head), Interleave: r.Interleave,
		Alpha: r.Alpha, SweepFailed: r.SweepFailed, Warnings: nonNil(r.Warnings), Missing: keyStrings(r.Missing),
		Rules: []jsonRule{},
	}
	if r.HasBaseline {
		doc.Base = jsonSweepOf(r.Base)
	}
	if r.HasNull {
		doc.Null = jsonSweepOf(r.Null)
	}
	if r.HasAgain {
		doc.Again = jsonSweepOf(r.Again)
	}
	for _, rr := range r.Rules {
		jr := jsonRule{Rule: rr.Rule.Text, Source: rr.Rule.Source, Unmatched: rr.Unmatched, Checks: []jsonCheck{}}
		for _, c := range rr.Checks {
			jr.Checks = append(jr.Checks, jsonCheck{
				Cell: c.Cell.String(), Verdict: string(c.Verdict), Unit: c.Unit, Statistic: c.Statistic,
				NBase: c.N1, NHead: c.N2, Value: num(c.Value), Baseline: num(c.Baseline), Ratio: num(c.Ratio),
				NullRatio: num(c.NullRatio), RunRatio: num(c.RunRatio), P: num(c.P), PBeyond: num(c.PBeyond),
				MDEPct: num(c.MDEPct), Paired: jsonPairedOf(c.Paired), Note: c.Note,
			})
		}
		doc.Rules = append(doc.Rules, jr)
	}
	return writeIndented(w, doc)
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func keyStrings(keys []CellKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}
