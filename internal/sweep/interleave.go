package sweep

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/registry"
)

// Interleaving: a sweep that compares two things — two targets, two
// versions or two switch sets of the built-in engine — runs them in one
// sweep (--interleave), alternating run by run in balanced blocks, so that
// the two runs of a block share one machine state and the comparison tests
// paired differences (stats.Paired) instead of two environment draws.

// Interleave orders (InterleaveSettings.Order). Random is the default:
// on the embedded NATS world, A/A pairs in ABBA blocks were significant in
// about 16% of the paired tests of TTLS and TTC, in random blocks in 4%
// (docs/compare-gate-ci.md): a fixed order lines a side up with whatever
// recurs at fixed points of a sweep.
const (
	OrderABBA   = "abba"
	OrderRandom = "random"
)

// Defaults of the precision budget.
const (
	// DefaultMaxRuns caps the measured runs a side of a --precision sweep
	// when neither --max-runs nor --max-time is given.
	DefaultMaxRuns = 100
	// maxRunsTimeOnly caps them when only --max-time is.
	maxRunsTimeOnly = 10000
)

// InterleaveSettings are the plan's --interleave, --precision,
// --precision-metric, --max-runs and --max-time.
type InterleaveSettings struct {
	// Order is "" (no interleaving), OrderABBA or OrderRandom.
	Order string
	// PrecisionPct, when > 0, adds blocks until the paired ratio's CI
	// half-width is at most this percentage for each precision metric.
	PrecisionPct float64
	// PrecisionMetrics are the metrics it applies to; empty: TTLS, or
	// TTC for a scenario without it.
	PrecisionMetrics []string
	MaxRuns          int
	MaxTime          time.Duration
	// Rounds, when 2 or more, splits each pair's blocks into that many
	// rounds, both sides' processes started afresh before each.
	Rounds int
}

func init() {
	fields = append(fields,
		field{"interleave", false, "run the plan's A/B pair in one sweep, run by run in blocks of one run each, both warmed up, one run in flight at a time: random (each block's order drawn from --seed; --interleave) or abba (blocks AB, BA, AB, …: --interleave=abba). The pair is the dimension with exactly two values — --targets, else --versions, else --switches — its first value the base (A), the second the head (B); compare FILE then tests the paired differences", setInterleave},
		field{"precision", false, "with --interleave: add blocks until the paired ratio's 95% CI is at most ± this (e.g. 2%) for every --precision-metric, or --max-runs / --max-time is spent (it stops on the interval's width, never on significance)", setPrecision},
		field{"precision-metric", true, "metrics --precision applies to (default ttls, or ttc for a scenario without it)", func(p *Plan, v []string) error {
			p.Interleave.PrecisionMetrics = dedup(v)
			return nil
		}},
		field{"max-runs", false, fmt.Sprintf("with --precision: measured runs a side at most (default %d; unbounded with --max-time alone)", DefaultMaxRuns), func(p *Plan, v []string) (err error) {
			p.Interleave.MaxRuns, err = intMin(v[0], 1)
			return err
		}},
		field{"max-time", false, "with --precision: add no block once a pair's measured runs took this long", func(p *Plan, v []string) (err error) {
			p.Interleave.MaxTime, err = duration(v[0], true)
			return err
		}},
		field{"rounds", false, "with --interleave: split each pair's --reps blocks into this many rounds, both sides' processes (the targets' adapters; the in-process engines and worlds) started afresh and warmed up (--warmup) before each; compare then tests the pair across its rounds (Student's t on each round's estimate), so that an environment drawn once per process counts once per round, not once per block", func(p *Plan, v []string) (err error) {
			p.Interleave.Rounds, err = intMin(v[0], 2)
			return err
		}},
	)
	fieldKinds["interleave"] = kBoolOrWord
	fieldKinds["max-runs"] = kInt
	fieldKinds["max-time"] = kDuration
	fieldKinds["rounds"] = kInt
}

func setInterleave(p *Plan, v []string) error {
	switch strings.ToLower(strings.TrimSpace(v[0])) {
	case "true", OrderRandom:
		p.Interleave.Order = OrderRandom
	case OrderABBA:
		p.Interleave.Order = OrderABBA
	case "false", "none", "off":
		p.Interleave.Order = ""
	default:
		return fmt.Errorf("%q is not abba, random, true or false", v[0])
	}
	return nil
}

func setPrecision(p *Plan, v []string) error {
	s := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v[0]), "%"))
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || f >= 100 {
		return fmt.Errorf("%q is not a percentage between 0 and 100 (e.g. 2%%)", v[0])
	}
	p.Interleave.PrecisionPct = f
	return nil
}

// cellPair is an interleaved pair of the plan's cells: a and b index the
// plan's cells (a is the base side).
type cellPair struct {
	a, b int
	// seed draws the blocks' order (OrderRandom).
	seed int64
	// metrics are the precision metrics of the pair's scenario.
	metrics []string
}

// pairs are the plan's interleaved pairs (nil without --interleave) and
// the results file's record of them.
func (p *Plan) resolvePairs(cells []CellPlan) ([]cellPair, *results.Interleave, error) {
	in := &p.Interleave
	if in.Order == "" {
		for _, name := range []string{"precision", "precision-metric", "max-runs", "max-time", "rounds"} {
			if p.given(name) {
				return nil, nil, p.errAt(name, errors.New("is a setting of interleaved pairs: give --interleave too"))
			}
		}
		return nil, nil, nil
	}
	bad := func(format string, a ...any) error { return p.errAt("interleave", fmt.Errorf(format, a...)) }
	if p.Pace == "open" || p.Concurrency != 1 {
		return nil, nil, bad("runs one run at a time, the two cells' runs taking turns: pace burst or closed with concurrency 1 (the plan has pace %s, concurrency %d)", p.Pace, p.Concurrency)
	}
	if p.External.Enabled() {
		return nil, nil, bad("the two cells of a pair run at once, in this process or on their targets, not on external workers")
	}
	if in.PrecisionPct == 0 {
		for _, name := range []string{"precision-metric", "max-runs", "max-time"} {
			if p.given(name) {
				return nil, nil, p.errAt(name, errors.New("is a setting of --precision: give it too"))
			}
		}
	} else {
		for _, c := range cells {
			if c.World.VirtualTime {
				return nil, nil, p.errAt("precision", fmt.Errorf("world %s runs in virtual time: its figures do not drift and a seed replays them exactly, so there is nothing to add blocks against; raise --reps instead", c.World.Name))
			}
		}
		switch {
		case !p.given("max-runs") && p.given("max-time"):
			in.MaxRuns = maxRunsTimeOnly
		case !p.given("max-runs"):
			in.MaxRuns = DefaultMaxRuns
		}
		if in.MaxRuns < p.Reps {
			return nil, nil, p.errAt("max-runs", fmt.Errorf("%d is fewer than --reps %d, the runs every pair measures before the precision is checked", in.MaxRuns, p.Reps))
		}
	}
	if in.Rounds > 1 {
		if in.PrecisionPct > 0 {
			return nil, nil, p.errAt("rounds", errors.New("and --precision: the stopping rule is on the blocks' interval, not the rounds'; give one of them"))
		}
		if in.Rounds > p.Reps {
			return nil, nil, p.errAt("rounds", fmt.Errorf("%d rounds of --reps %d: every round needs a block", in.Rounds, p.Reps))
		}
		for _, c := range cells {
			if c.World.VirtualTime {
				return nil, nil, p.errAt("rounds", fmt.Errorf("world %s runs in virtual time: a seed replays it exactly, so there is no process to draw afresh", c.World.Name))
			}
		}
		for _, t := range p.foreignTargets() {
			if t.URL != "" {
				return nil, nil, p.errAt("rounds", fmt.Errorf("target %s is reached by URL: durabench cannot start it afresh", t))
			}
		}
	}
	rec := &results.Interleave{Order: in.Order, PrecisionPct: in.PrecisionPct, PrecisionMetrics: in.PrecisionMetrics,
		MaxTimeMS: in.MaxTime.Milliseconds()}
	if in.Rounds > 1 {
		rec.Rounds = in.Rounds
	}
	if in.PrecisionPct > 0 {
		rec.MaxRuns = in.MaxRuns
	}
	// side returns a cell's side (0: A, 1: B) and the key of its group:
	// the cell's key without the pair's dimension.
	var side func(c CellPlan) (int, string)
	switch {
	case len(p.Targets) == 2:
		if p.hasReference() && (len(p.Versions) > 1 || len(p.Switches) > 1 || len(p.Worlds) > 1 || len(p.Profiles) > 1) {
			return nil, nil, bad("pairs the two targets, so the reference target must be one cell per scenario and size: one version, switch set, world and profile (the plan has %d, %d, %d and %d)",
				len(p.Versions), len(p.Switches), len(p.Worlds), len(p.Profiles))
		}
		rec.Dimension, rec.A, rec.B = "targets", p.Targets[0].String(), p.Targets[1].String()
		side = func(c CellPlan) (int, string) {
			s := 0
			if c.Target == nil && !p.Targets[0].IsReference() || c.Target != nil && c.Target.ID() != p.Targets[0].ID() {
				s = 1
			}
			return s, cellKey(c.Scenario.Name, c.Options, "", "", "", "")
		}
	case len(p.Targets) > 2:
		return nil, nil, bad("pairs exactly two targets; the plan has %d", len(p.Targets))
	case !p.hasReference():
		return nil, nil, bad("pairs two targets, two versions or two switch sets; the plan has one target, %s", p.Targets[0])
	case len(p.Versions) == 2 && len(p.Switches) == 2:
		return nil, nil, bad("the plan has two versions and two switch sets: interleaving pairs one dimension, so keep the other to one value")
	case len(p.Versions) == 2:
		rec.Dimension, rec.A, rec.B = "versions", p.Versions[0].Name, p.Versions[1].Name
		side = func(c CellPlan) (int, string) {
			s := 0
			if c.Version.Name != p.Versions[0].Name {
				s = 1
			}
			return s, cellKey(c.Scenario.Name, c.Options, "", c.Switches.String(), c.World.Name, c.ProfileName)
		}
	case len(p.Switches) == 2:
		rec.Dimension, rec.A, rec.B = "switches", p.Switches[0].String(), p.Switches[1].String()
		side = func(c CellPlan) (int, string) {
			s := 0
			if c.Switches.String() != p.Switches[0].String() {
				s = 1
			}
			return s, cellKey(c.Scenario.Name, c.Options, c.Version.Name, "", c.World.Name, c.ProfileName)
		}
	default:
		return nil, nil, bad("pairs the dimension with exactly two values: --targets, --versions or --switches (the plan has %d targets, %d versions and %d switch sets)",
			len(p.Targets), len(p.Versions), len(p.Switches))
	}
	groups := map[string]*[2]int{}
	var order []string
	for i, c := range cells {
		s, g := side(c)
		if groups[g] == nil {
			groups[g] = &[2]int{-1, -1}
			order = append(order, g)
		}
		if groups[g][s] >= 0 {
			return nil, nil, bad("cells %s and %s are on the same side of one pair", cells[groups[g][s]].Label(), c.Label())
		}
		groups[g][s] = i
	}
	var pairs []cellPair
	for _, g := range order {
		ab := groups[g]
		for s := range 2 {
			if ab[s] < 0 {
				return nil, nil, bad("cell %s has no partner", cells[ab[1-s]].Label())
			}
		}
		a, b := cells[ab[0]], cells[ab[1]]
		if a.World.VirtualTime != b.World.VirtualTime {
			return nil, nil, bad("cells %s and %s run one in virtual time (world %s), the other in real time (world %s): they cannot take turns",
				a.Label(), b.Label(), a.World.Name, b.World.Name)
		}
		sum := sha256.Sum256([]byte(a.Key + "\x00" + b.Key))
		cp := cellPair{a: ab[0], b: ab[1], seed: p.Seed ^ keyBits(sum)}
		if in.PrecisionPct > 0 {
			var err error
			if cp.metrics, err = p.precisionMetrics(a); err != nil {
				return nil, nil, err
			}
		}
		pairs = append(pairs, cp)
	}
	slices.SortFunc(pairs, func(x, y cellPair) int { return x.a - y.a })
	return pairs, rec, nil
}

// precisionMetrics are the metrics --precision applies to in cell c.
func (p *Plan) precisionMetrics(c CellPlan) ([]string, error) {
	measures := func(m string) bool { return len(c.Scenario.Metrics) == 0 || slices.Contains(c.Scenario.Metrics, m) }
	if len(p.Interleave.PrecisionMetrics) == 0 {
		if measures("ttls") {
			return []string{"ttls"}, nil
		}
		return []string{"ttc"}, nil
	}
	var out []string
	for _, m := range p.Interleave.PrecisionMetrics {
		if measures(m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, p.errAt("precision-metric", fmt.Errorf("scenario %s measures none of them (it measures %s)", c.Scenario.Name, strings.Join(c.Scenario.Metrics, ", ")))
	}
	return out, nil
}

// pairRun is what a cell of a pair runs with (CellPlan.pair): its side of
// the turnstile, and the driver settings the pair needs.
type pairRun struct {
	turn driver.Turn
	// reps are the measured runs at most (the precision budget's), and
	// timeout each phase's: the two cells' runs share the wall time.
	reps    int
	timeout time.Duration
	// quiet: the cell's runs are not reported to the progress (the pair
	// reports one side's, so a cell's bar counts one cell's runs).
	quiet bool
	// round is the pair's round (--rounds), from 1; 0 without rounds.
	round int
}

// apply sets the driver config of a pair's cell.
func (pr *pairRun) apply(dc *driver.Config) {
	dc.Turn, dc.Reps, dc.CellTimeout = pr.turn, pr.reps, pr.timeout
	if pr.quiet {
		dc.OnRun = nil
	}
	if pr.round > 1 {
		// A new process may not know the ids of the last round's runs,
		// but the results must never hold two runs of one id.
		dc.RunPrefix += "-R" + strconv.Itoa(pr.round)
	}
}

// pairBudget is the measured runs a side at most and each phase's
// timeout of an interleaved pair.
func (p *Plan) pairBudget() (reps int, timeout time.Duration) {
	reps, timeout = p.Reps, 2*p.CellTimeout
	in := p.Interleave
	if in.PrecisionPct > 0 {
		reps = in.MaxRuns
		rounds := (in.MaxRuns + p.Reps - 1) / p.Reps
		timeout = 2 * p.CellTimeout * time.Duration(min(rounds, 1000))
		if in.MaxTime > 0 {
			timeout = min(timeout, in.MaxTime+2*p.CellTimeout)
		}
	}
	return reps, timeout
}

// runPair runs the pair's two cells: on a real-time world at once, taking
// turns (a turnstile lets one run of the two be in flight, in the blocks'
// order); on a virtual-time world one after the other. It returns both
// cells with their pairing, or interrupted (either side was), or an error:
// a *stopAfterCell comes with both cells, to keep before stopping.
func (r *sweepRun) runPair(ctx context.Context, cp cellPair, a, b CellPlan) (cells [2]results.Cell, interrupted bool, err error) {
	plans := [2]CellPlan{a, b}
	index := [2]int{cp.a, cp.b}
	var res [2]*driver.Result
	var errs [2]error
	mode := results.PairTurnstile
	var ts *turnstile
	var placeRounds []pairRound
	if a.World.VirtualTime && b.World.VirtualTime {
		// Virtual time: nothing else the machine does moves a figure, so
		// the cells run as any other, one after the other.
		mode = results.PairSequential
		for s, c := range plans {
			r.prog.CellStart(index[s], c)
			cells[s], res[s], errs[s] = r.runCell(ctx, c)
			if errs[s] != nil || res[s].Interrupted {
				r.prog.CellFailed(index[s], c, cmp.Or(errs[s], ErrInterrupted))
				break
			}
			r.prog.CellDone(index[s], c, &cells[s], false)
		}
	} else {
		r.prog.CellStart(cp.a, a) // its bar counts A's runs
		var rounds []pairRound
		rounds, errs = r.runRounds(ctx, cp, plans)
		for s := range 2 {
			res[s] = mergeRounds(rounds, s)
		}
		if res[0] != nil && res[1] != nil && !res[0].Interrupted && !res[1].Interrupted && len(rounds) > 1 {
			for s := range 2 {
				cells[s] = mergeRoundCells(plans[s], rounds, s, res[s])
			}
		} else if len(rounds) > 0 {
			cells = rounds[len(rounds)-1].cells
		}
		if len(rounds) > 0 {
			ts = rounds[len(rounds)-1].ts
		}
		placeRounds = rounds
	}
	var stop *stopAfterCell
	for s := range 2 {
		if errs[s] != nil && !errors.As(errs[s], &stop) {
			if mode == results.PairTurnstile {
				r.prog.CellFailed(index[s], plans[s], errs[s])
			}
			return cells, false, errs[s]
		}
	}
	for s := range 2 {
		if res[s] == nil || res[s].Interrupted {
			if mode == results.PairTurnstile {
				r.prog.CellFailed(cp.a, a, ErrInterrupted)
			}
			return cells, true, nil
		}
	}
	pairID := r.id + "-" + a.Hash
	for s := range 2 {
		pg := &results.Pairing{Pair: pairID, Side: []string{results.SideA, results.SideB}[s], Partner: plans[1-s].Key,
			Mode: mode, Runs: []results.PairedRun{}}
		for i, tl := range res[s].Timelines {
			run := results.PairedRun{Run: tl.ID, Block: i + 1, Position: s, Values: results.RunValues(tl, plans[s].Metrics)}
			if ts != nil {
				run.Block, run.Position, run.Round = placeInRounds(placeRounds, s, i)
				pg.Stopped = ts.stoppedWhy()
			}
			pg.Runs = append(pg.Runs, run)
		}
		cells[s].Pairing = pg
	}
	if mode == results.PairTurnstile {
		r.prog.CellDone(cp.a, a, &cells[0], false)
		r.prog.CellStart(cp.b, b)
		r.prog.CellDone(cp.b, b, &cells[1], false)
	}
	if stop != nil {
		return cells, false, stop
	}
	return cells, false, nil
}

// pairRound is one round of an interleaved pair: its turnstile and each
// side's cell and driver result.
type pairRound struct {
	ts    *turnstile
	cells [2]results.Cell
	res   [2]*driver.Result
}

// runRounds runs the pair's rounds (one without --rounds): in each, both
// cells take turns on the round's turnstile; before each round after the
// first, both sides' target adapters are started afresh (the in-process
// engines and worlds are new in every round, as in every cell). It stops
// at the first round a side failed or was interrupted in, and returns
// the rounds run (that one included) and the sides' errors.
func (r *sweepRun) runRounds(ctx context.Context, cp cellPair, plans [2]CellPlan) (rounds []pairRound, errs [2]error) {
	p := r.plan
	a, b := plans[0], plans[1]
	n := max(p.Interleave.Rounds, 1)
	reps, timeout := p.pairBudget()
	for k := range n {
		if k > 0 && ctx.Err() != nil {
			// Interrupted between rounds: the pair is incomplete.
			for s := range 2 {
				rounds[len(rounds)-1].res[s].Interrupted = true
			}
			return rounds, errs
		}
		if k > 0 {
			// Both adapters at once: a Node adapter takes seconds to start.
			var wg sync.WaitGroup
			var restartErrs [2]error
			for s, c := range plans {
				if c.Target == nil {
					continue
				}
				if lt := r.live[c.Target.ID()]; lt != nil {
					wg.Go(func() { restartErrs[s] = lt.restart(ctx) })
				}
			}
			wg.Wait()
			if err := errors.Join(restartErrs[0], restartErrs[1]); err != nil {
				if ctx.Err() != nil { // interrupted while starting them
					for s := range 2 {
						rounds[len(rounds)-1].res[s].Interrupted = true
					}
					return rounds, errs
				}
				errs[0] = err
				return rounds, errs
			}
		}
		// The blocks planned, and the runs a side at most (more with
		// --precision); rounds share --reps, the first ones taking one
		// more when they do not divide evenly (no --precision with them).
		planned, rreps := p.Reps, reps
		if n > 1 {
			planned = p.Reps / n
			if k < p.Reps%n {
				planned++
			}
			rreps = planned
		}
		seed := cp.seed
		if k > 0 {
			seed ^= int64(k) * -7046029254386353131
		}
		ts := newTurnstile(p.Interleave.Order, seed, p.Warmup, planned, precisionRule{
			pct: p.Interleave.PrecisionPct, metrics: cp.metrics, maxRuns: rreps, maxTime: p.Interleave.MaxTime})
		ts.metrics[0], ts.metrics[1] = a.Metrics, b.Metrics
		// One world server for both cells where the world can share one
		// (the embedded NATS server): two servers are two environment
		// draws that last a whole cell, which pairing cannot remove (A/A
		// pairs on two embedded servers were significant in 9.5% of the
		// paired tests, on one in 4.4%).
		var shared registry.Shared
		if a.Target == nil && b.Target == nil && a.World == b.World && a.World.Share != nil {
			var err error
			if shared, err = a.World.Share(context.WithoutCancel(ctx), a.WorldSettings); err != nil {
				errs[0] = fmt.Errorf("world %s: shared server: %w", a.World.Name, err)
				return rounds, errs
			}
		}
		round := 0
		if n > 1 {
			round = k + 1
		}
		var pr pairRound
		pr.ts = ts
		var wg sync.WaitGroup
		for s, c := range plans {
			c.pair = &pairRun{turn: ts.side(s), reps: rreps, timeout: timeout, quiet: s == 1, round: round}
			c.shared = shared
			wg.Go(func() {
				defer ts.leave(s)
				pr.cells[s], pr.res[s], errs[s] = r.runCell(ctx, c)
			})
		}
		wg.Wait()
		if shared != nil {
			shared.Close()
		}
		rounds = append(rounds, pr)
		var stop *stopAfterCell
		for s := range 2 {
			if errs[s] != nil && !errors.As(errs[s], &stop) || pr.res[s] == nil || pr.res[s].Interrupted {
				return rounds, errs
			}
		}
		if stop != nil {
			return rounds, errs
		}
	}
	return rounds, errs
}

// mergeRounds is side s's driver result over the rounds: their runs in
// order; nil when a round has none (the side failed).
func mergeRounds(rounds []pairRound, s int) *driver.Result {
	if len(rounds) == 1 {
		return rounds[0].res[s]
	}
	out := &driver.Result{}
	for _, pr := range rounds {
		res := pr.res[s]
		if res == nil {
			return nil
		}
		out.Timelines = append(out.Timelines, res.Timelines...)
		out.Unstarted = append(out.Unstarted, res.Unstarted...)
		out.Lag = append(out.Lag, res.Lag...)
		out.Elapsed += res.Elapsed
		out.TimedOut = out.TimedOut || res.TimedOut
		out.Interrupted = out.Interrupted || res.Interrupted
	}
	return out
}

// mergeRoundCells is side s's cell over the rounds: measured again from
// the merged result (res), with what each round's cell measured of the
// target besides — the cores kept busy (weighted by each round's time),
// the worst clock error and drift, the polls and anomalies summed.
func mergeRoundCells(c CellPlan, rounds []pairRound, s int, res *driver.Result) results.Cell {
	first := rounds[0].cells[s]
	rc := c.summarize(res, first)
	var cpu results.CellCPU
	var target, steal float64
	var hasTarget, hasSteal bool
	var weight float64
	for _, pr := range rounds {
		x := pr.cells[s]
		rc.ClockErrorUS = max(rc.ClockErrorUS, x.ClockErrorUS)
		if math.Abs(x.ClockDriftUS) > math.Abs(rc.ClockDriftUS) {
			rc.ClockDriftUS = x.ClockDriftUS
		}
		rc.TargetPolls += x.TargetPolls
		rc.EarlyEmptyPolls += x.EarlyEmptyPolls
		rc.DroppedSpans += x.DroppedSpans
		if rc.DroppedSpan == "" {
			rc.DroppedSpan = x.DroppedSpan
		}
		rc.AnomalousRuns = append(rc.AnomalousRuns, x.AnomalousRuns...)
		if x.WorldIncidents != nil {
			if rc.WorldIncidents == nil {
				rc.WorldIncidents = &world.Incidents{}
			}
			*rc.WorldIncidents = rc.WorldIncidents.Add(*x.WorldIncidents)
		}
		if x.CPU == nil {
			continue
		}
		w := max(x.ElapsedMS, 1)
		weight += w
		cpu.DurabenchCores += x.CPU.DurabenchCores * w
		if x.CPU.TargetCores != nil {
			target += *x.CPU.TargetCores * w
			hasTarget = true
		}
		if x.CPU.StealCores != nil {
			steal += *x.CPU.StealCores * w
			hasSteal = true
		}
	}
	rc.Anomalies = len(rc.AnomalousRuns)
	if weight > 0 {
		cpu.DurabenchCores /= weight
		if hasTarget {
			v := target / weight
			cpu.TargetCores = &v
		}
		if hasSteal {
			v := steal / weight
			cpu.StealCores = &v
		}
		rc.CPU = &cpu
	}
	return rc
}

// placeInRounds is side s's measured run i (over the rounds, in order):
// its block, numbered on across the rounds, its position, and its round
// (0 without rounds).
func placeInRounds(rounds []pairRound, s, i int) (block, pos, round int) {
	offset := 0
	for k, pr := range rounds {
		n := len(pr.res[s].Timelines)
		if i < n {
			block, pos = pr.ts.placeOf(s, i)
			if len(rounds) > 1 {
				round = k + 1
			}
			return block + offset, pos, round
		}
		i -= n
		offset += pr.ts.blocks
	}
	return i + 1, s, 0
}

// precisionRule is when a turnstile stops adding blocks (--precision):
// once every metric's paired CI half-width is at most pct, or maxRuns
// blocks ran, or the measured runs took maxTime. pct 0 adds none past
// the plan's reps.
type precisionRule struct {
	pct     float64
	metrics []string
	maxRuns int
	maxTime time.Duration
}

// slot is one run's turn: run i of side's phase, position pos of block.
type slot struct {
	side, i    int
	warmup     bool
	block, pos int
}

// turnstile lets the two cells of a pair take turns: one run of the two
// in flight at a time, in the order of the pair's blocks (block k holds
// run k of each side, their order abba or random). Without a precision
// target every block is planned at once; with one, a block is added when
// the last one ended, until the rule says stop.
type turnstile struct {
	mu      sync.Mutex
	changed chan struct{}
	order   string
	seed    int64
	rule    precisionRule
	reps    int
	slots   []slot
	cur     int
	// busy: slots[cur] was granted and its run is in flight.
	busy bool
	// closed[side][phase] (phase 0 warm-up, 1 measured): the side's phase
	// is over (or the side left); its slots are skipped.
	closed [2][2]bool
	// arrived[side]: the side's driver asked for its first turn (its world
	// and engine are up). No run starts before both did, so that one
	// side's set-up (starting a NATS server) does not run beside the
	// other's first runs.
	arrived [2]bool
	// blocks are the measured blocks planned; planned is set once no more
	// will be.
	blocks, warmBlocks int
	planned            bool
	stopped            string
	start              time.Time
	now                func() time.Time
	// place[side][i] is measured run i's block (from 1) and position.
	place [2]map[int][2]int
	// values[side][i] are measured run i's tested values (precision).
	values  [2]map[int]map[string]int64
	metrics [2]metrics.Config
}

// newTurnstile plans warmup warm-up blocks and reps measured ones (all
// of them without a precision target).
func newTurnstile(order string, seed int64, warmup, reps int, rule precisionRule) *turnstile {
	t := &turnstile{changed: make(chan struct{}), order: order, seed: seed, rule: rule, reps: reps, now: time.Now}
	for s := range 2 {
		t.place[s] = map[int][2]int{}
		t.values[s] = map[int]map[string]int64{}
	}
	for range warmup {
		t.addBlock(true)
	}
	for range reps {
		t.addBlock(false)
	}
	if rule.pct <= 0 {
		t.planned = true
	}
	return t
}

// firstOf is the side that runs first in block k of a phase: A, B, A, …
// (abba), or a draw from the seed (random).
func (t *turnstile) firstOf(warmup bool, k int) int {
	if t.order != OrderRandom {
		return k % 2
	}
	tag := int64(k) << 1
	if warmup {
		tag |= 1
	}
	x := uint64(t.seed ^ tag*-7046029254386353131)
	// splitmix64's finaliser: one independent coin per block.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x & 1)
}

func (t *turnstile) addBlock(warmup bool) {
	k := t.blocks
	if warmup {
		k = t.warmBlocks
		t.warmBlocks++
	} else {
		t.blocks++
	}
	first := t.firstOf(warmup, k)
	for pos, s := range []int{first, 1 - first} {
		t.slots = append(t.slots, slot{side: s, i: k, warmup: warmup, block: k + 1, pos: pos})
	}
}

func phaseOf(warmup bool) int {
	if warmup {
		return 0
	}
	return 1
}

// broadcastLocked wakes every waiter.
func (t *turnstile) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// advanceLocked skips the slots of closed phases and, once every planned
// slot is used, plans the next measured block or stops.
func (t *turnstile) advanceLocked() {
	for {
		for !t.busy && t.cur < len(t.slots) && t.closed[t.slots[t.cur].side][phaseOf(t.slots[t.cur].warmup)] {
			t.cur++
		}
		if t.cur < len(t.slots) || t.planned {
			return
		}
		if why := t.stopLocked(); why != "" {
			t.planned, t.stopped = true, why
			return
		}
		t.addBlock(false)
	}
}

// stopLocked applies the precision rule once every planned block ended:
// why to stop adding blocks, or "" to add one.
func (t *turnstile) stopLocked() string {
	r := t.rule
	// ABBA stops after an even number of blocks only, so that each side
	// ran first in as many blocks as the other.
	if t.blocks >= t.reps && (t.order == OrderRandom || t.blocks%2 == 0) && t.sharpLocked() {
		return results.StoppedPrecision
	}
	if t.blocks >= r.maxRuns {
		return results.StoppedMaxRuns
	}
	if t.closed[0][1] || t.closed[1][1] {
		return "a side ended" // no pair to add to
	}
	if r.maxTime > 0 && !t.start.IsZero() && t.now().Sub(t.start) >= r.maxTime {
		return results.StoppedMaxTime
	}
	return ""
}

// sharpLocked reports whether every precision metric's paired interval
// is narrow enough.
func (t *turnstile) sharpLocked() bool {
	for _, m := range t.rule.metrics {
		var d []float64
		for k := range t.blocks {
			a, okA := t.values[0][k][m]
			b, okB := t.values[1][k][m]
			if okA && okB {
				d = append(d, stats.LogRatio(a, b))
			}
		}
		if len(d) < 2 || !(halfWidthPct(d) <= t.rule.pct) {
			return false
		}
	}
	return true
}

// side is the turnstile as side s's driver takes its turns.
func (t *turnstile) side(s int) driver.Turn { return &turnSide{t, s} }

type turnSide struct {
	t    *turnstile
	side int
}

func (ts *turnSide) Wait(ctx context.Context, warmup bool, i int) error {
	t := ts.t
	for {
		t.mu.Lock()
		if !t.arrived[ts.side] {
			t.arrived[ts.side] = true
			t.broadcastLocked() // the other side may be waiting for this one
		}
		t.advanceLocked()
		ready := (t.arrived[0] || t.closed[0][1]) && (t.arrived[1] || t.closed[1][1])
		if ready && !t.busy && t.cur < len(t.slots) {
			if s := t.slots[t.cur]; s.side == ts.side && s.warmup == warmup && s.i == i {
				t.busy = true
				if !warmup {
					if t.start.IsZero() {
						t.start = t.now()
					}
					t.place[ts.side][i] = [2]int{s.block, s.pos}
				}
				t.mu.Unlock()
				return nil
			}
		}
		if !warmup && t.planned && i >= t.blocks || warmup && i >= t.warmBlocks {
			t.mu.Unlock()
			return driver.ErrEnough
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (ts *turnSide) Done(warmup bool, i int, tl metrics.RunTimeline) {
	t := ts.t
	var vals map[string]int64
	if !warmup && t.rule.pct > 0 {
		vals = results.RunValues(tl, t.metrics[ts.side])
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.busy || t.cur >= len(t.slots) {
		return
	}
	if s := t.slots[t.cur]; s.side != ts.side || s.warmup != warmup || s.i != i {
		return // a run given up that finished late
	}
	if vals != nil {
		t.values[ts.side][i] = vals
	}
	t.busy = false
	t.cur++
	t.advanceLocked()
	t.broadcastLocked()
}

// End ends the side's phase. The measured phase's End returns only once
// the other side's measured phase is over too: a driver that returns
// summarizes its cell and closes its world, work that must not run beside
// the other side's last runs (it made them 30% slower on the mem world).
func (ts *turnSide) End(warmup bool) {
	t := ts.t
	t.mu.Lock()
	t.closeLocked(ts.side, phaseOf(warmup))
	for !warmup && !t.closed[1-ts.side][1] {
		ch := t.changed
		t.mu.Unlock()
		<-ch
		t.mu.Lock()
	}
	t.mu.Unlock()
}

// closeLocked ends side's phase: its slots are skipped, and its run in
// flight, if any, given up.
func (t *turnstile) closeLocked(side, phase int) {
	t.closed[side][phase] = true
	if t.busy && t.cur < len(t.slots) {
		if s := t.slots[t.cur]; s.side == side && phaseOf(s.warmup) == phase {
			t.busy = false
			t.cur++
		}
	}
	t.advanceLocked()
	t.broadcastLocked()
}

// leave ends both phases of side s: its driver returned.
func (t *turnstile) leave(s int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked(s, 0)
	t.closeLocked(s, 1)
}

// placeOf is measured run i of side s's block (from 1) and position.
func (t *turnstile) placeOf(s, i int) (block, pos int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bp, ok := t.place[s][i]; ok {
		return bp[0], bp[1]
	}
	return i + 1, s
}

// stoppedWhy is why the turnstile stopped adding blocks (--precision):
// results.StoppedPrecision, StoppedMaxRuns or StoppedMaxTime; "" without
// a precision target.
func (t *turnstile) stoppedWhy() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.stopped {
	case results.StoppedPrecision, results.StoppedMaxRuns, results.StoppedMaxTime:
		return t.stopped
	}
	return ""
}

// halfWidthPct is the precision rule's width of log ratios d: from their
// magnitudes alone, so that stopping keeps the paired test's level
// (stats.SpreadHalfWidthPct).
func halfWidthPct(d []float64) float64 { return stats.SpreadHalfWidthPct(d, stats.Alpha) }

// interleaveString describes an interleave record for resume's check.
func interleaveString(in *results.Interleave) string {
	if in == nil {
		return "off"
	}
	return fmt.Sprintf("%s %s %s/%s precision %g%% %v max %d runs %dms", in.Order, in.Dimension, in.A, in.B,
		in.PrecisionPct, in.PrecisionMetrics, in.MaxRuns, in.MaxTimeMS)
}

// pairsByCell maps each paired cell's index to its pair.
func (r *sweepRun) pairsByCell() map[int]cellPair {
	out := map[int]cellPair{}
	if r.plan.resolved == nil {
		return out
	}
	for _, cp := range r.plan.resolved.pairs {
		out[cp.a], out[cp.b] = cp, cp
	}
	return out
}

// runPairCells runs pair cp into f (or takes both cells from done when an
// earlier run of the sweep finished them together), journaling both.
func (r *sweepRun) runPairCells(ctx context.Context, cp cellPair, cells []CellPlan, done map[string]results.Cell,
	journal *results.Journal, f *results.File) (failure error, interrupted bool) {
	a, b := cells[cp.a], cells[cp.b]
	pa, okA := done[a.Key]
	pb, okB := done[b.Key]
	if okA && okB && pa.Pairing != nil && pb.Pairing != nil && pa.Pairing.Pair == pb.Pairing.Pair {
		f.Cells = append(f.Cells, pa, pb)
		r.prog.CellDone(cp.a, a, &pa, true)
		r.prog.CellDone(cp.b, b, &pb, true)
		return nil, false
	}
	if ctx.Err() != nil {
		return nil, true
	}
	got, interrupted, err := r.runPair(ctx, cp, a, b)
	var stop *stopAfterCell
	switch {
	case err != nil && !errors.As(err, &stop):
		return fmt.Errorf("pair %s / %s: %w", a.Label(), b.Label(), err), false
	case interrupted:
		return nil, true
	}
	for _, rc := range got {
		if jerr := journal.Append(rc); jerr != nil {
			return jerr, false
		}
	}
	f.Cells = append(f.Cells, got[0], got[1])
	if stop != nil {
		return fmt.Errorf("after pair %s / %s: %w", a.Label(), b.Label(), stop.err), false
	}
	return nil, false
}
