package results

import (
	"fmt"

	"github.com/durabench/durabench/metrics"
)

// Interleave is how an interleaved sweep (sweep --interleave) paired its
// cells: the plan dimension with exactly two values, whose cells that
// agree on everything else ran as one pair, run by run in balanced blocks.
type Interleave struct {
	// Dimension is the plan dimension whose two values make a pair:
	// "targets", "versions" or "switches".
	Dimension string `json:"dimension"`
	// A and B are its two values as the plan names them. A is the base
	// side and B the head: a comparison of the file reads B against A.
	A string `json:"a"`
	B string `json:"b"`
	// Order is how each block orders its two runs: "abba" (AB, BA, AB, …)
	// or "random" (each block's order drawn from the plan's seed).
	Order string `json:"order"`
	// PrecisionPct, when set (sweep --precision), is the half-width in
	// percent the paired ratio's confidence interval had to reach for
	// each of PrecisionMetrics: blocks were added until it did, or until
	// MaxRuns runs a side or MaxTimeMS of measured time were spent.
	PrecisionPct     float64  `json:"precision_pct,omitempty"`
	PrecisionMetrics []string `json:"precision_metrics,omitempty"`
	MaxRuns          int      `json:"max_runs,omitempty"`
	MaxTimeMS        int64    `json:"max_time_ms,omitempty"`
	// Rounds, when set (sweep --rounds), is how many rounds each pair's
	// blocks ran in, both sides' processes started afresh before each
	// (PairedRun.Round); a paired test is then across the rounds.
	Rounds int `json:"rounds,omitempty"`
}

// Sides of an interleaved pair (Pairing.Side).
const (
	SideA = "a"
	SideB = "b"
)

// Modes of an interleaved pair (Pairing.Mode).
const (
	// PairTurnstile: real time. Both cells' drivers ran at once, each on
	// its own world, and a turnstile let exactly one run of the two be in
	// flight, in the block order: the two runs of a block ran back to
	// back on the same machine state.
	PairTurnstile = "turnstile"
	// PairSequential: virtual time (the sim world). A cell's figures do
	// not depend on what else the machine does, so the two cells ran one
	// after the other; block k pairs the k-th run of each, A's first.
	PairSequential = "sequential"
)

// Why a precision sweep stopped adding blocks (Pairing.Stopped).
const (
	StoppedPrecision = "precision"
	StoppedMaxRuns   = "max runs"
	StoppedMaxTime   = "max time"
)

// Pairing is a cell's part in an interleaved pair.
type Pairing struct {
	// Pair identifies the pair: both cells carry the same value, unique to
	// the sweep run that measured them.
	Pair string `json:"pair"`
	// Side is SideA or SideB; Partner is the other cell's key (as a
	// resumed sweep matches cells: scenario, options, version, switches,
	// world, profile, target).
	Side    string `json:"side"`
	Partner string `json:"partner"`
	// Mode is PairTurnstile or PairSequential.
	Mode string `json:"mode"`
	// Stopped says why blocks stopped being added (StoppedPrecision,
	// StoppedMaxRuns, StoppedMaxTime); empty without --precision.
	Stopped string `json:"stopped,omitempty"`
	// Runs are the cell's measured runs in run order: each one's block
	// and position, and its tested values.
	Runs []PairedRun `json:"runs"`
}

// PairedRun is one measured run of an interleaved cell.
type PairedRun struct {
	Run string `json:"run"`
	// Block is the run's block, from 1: the partner's run of the same
	// block is its pair. Position is 0 for the block's first run, 1 for
	// its second.
	Block    int `json:"block"`
	Position int `json:"position"`
	// Round is the round the block ran in, from 1, when the pair ran in
	// rounds (sweep --rounds: both sides' processes started afresh for
	// each); 0 otherwise. A paired test is then across the rounds.
	Round int `json:"round,omitempty"`
	// Values are the run's tested value of each metric in µs: the run's
	// own value of a metric with one sample per run, else the aggregate
	// the metric is tested on (metrics.TestedOn: the run's median or
	// mean). A metric the run had no sample of is absent.
	Values map[string]int64 `json:"values,omitempty"`
}

// RunValues are the tested values of one run's timeline (PairedRun.Values)
// under cfg: metrics.Collect of the run alone (its critical paths, which
// the values do not hold, left out), each metric's one value or per-run
// aggregate.
func RunValues(tl metrics.RunTimeline, cfg metrics.Config) map[string]int64 {
	cfg.NoPaths = true
	col := metrics.Collect([]metrics.RunTimeline{tl}, cfg)
	out := make(map[string]int64, len(col.Samples))
	for name, s := range col.Samples {
		if len(s.Values) == 0 {
			continue
		}
		stat := metrics.TestedOn(name)
		if stat == metrics.RunValue {
			out[name] = s.Values[0]
			continue
		}
		if v := s.PerRun(stat); len(v) > 0 {
			out[name] = v[0]
		}
	}
	return out
}

// validatePairing checks a cell's pairing.
func validatePairing(name, at string, p *Pairing) error {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{File: name, Field: at + ".pairing." + field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.Pair == "":
		return bad("pair", "missing")
	case p.Side != SideA && p.Side != SideB:
		return bad("side", "%q, want %q or %q", p.Side, SideA, SideB)
	case p.Partner == "":
		return bad("partner", "missing")
	}
	for i, r := range p.Runs {
		switch {
		case r.Block < 1:
			return bad(fmt.Sprintf("runs[%d].block", i), "%d, want >= 1", r.Block)
		case r.Position != 0 && r.Position != 1:
			return bad(fmt.Sprintf("runs[%d].position", i), "%d, want 0 or 1", r.Position)
		}
	}
	return nil
}
