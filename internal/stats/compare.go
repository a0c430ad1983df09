package stats

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// ErrMethodology is returned when two results files measured their metrics
// differently (results.File.Methodology differs): their numbers are never compared.
// It matches results.ErrInvalid (an input error, exit 2).
var ErrMethodology error = &inputError{"results measured with different methodology"}

// CellKey identifies a cell of the matrix across sweeps: two cells with the
// same key measured the same thing and can be compared.
type CellKey struct {
	// Target is the foreign engine under test ("" for the built-in one).
	Target   string
	Scenario string
	Branches int
	Steps    int
	// Options are the cell's scenario options as sorted "name=value" pairs
	// joined by ','.
	Options string
	Version string
	// Switches is "none" or the sorted "name=value" kill-switch pairs joined
	// by '+' (the engine's SwitchSet.String form).
	Switches string
	World    string
	Profile  string
}

// KeyOf returns the key of c.
func KeyOf(c *results.Cell) CellKey {
	return CellKey{
		Target:   c.Target,
		Scenario: c.Scenario,
		Branches: c.Branches,
		Steps:    c.Steps,
		Options:  optionsString(c.Options),
		Version:  c.Version,
		Switches: switchesString(c.Switches),
		World:    c.World,
		Profile:  c.Profile,
	}
}

func optionsString(opts map[string]string) string {
	if len(opts) == 0 {
		return ""
	}
	pairs := make([]string, 0, len(opts))
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		pairs = append(pairs, k+"="+opts[k])
	}
	return strings.Join(pairs, ",")
}

// switchesString canonicalises a switch list: "none" when empty, else the
// sorted pairs joined by '+'. A list may hold "none" or pairs already joined
// by ',' or '+'; both are split so every spelling of a set keys the same.
func switchesString(list []string) string {
	var pairs []string
	for _, s := range list {
		for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '+' }) {
			if p = strings.TrimSpace(p); p != "" && p != "none" {
				pairs = append(pairs, p)
			}
		}
	}
	if len(pairs) == 0 {
		return "none"
	}
	sort.Strings(pairs)
	return strings.Join(slices.Compact(pairs), "+")
}

// fields returns the key as ordered name=value parts; branches and steps
// are left out when zero, options when empty.
func (k CellKey) fields() [][2]string {
	f := [][2]string{{"scenario", k.Scenario}}
	if k.Branches != 0 {
		f = append(f, [2]string{"branches", strconv.Itoa(k.Branches)})
	}
	if k.Steps != 0 {
		f = append(f, [2]string{"steps", strconv.Itoa(k.Steps)})
	}
	if k.Options != "" {
		f = append(f, [2]string{"options", k.Options})
	}
	if k.Target == selected {
		return f // SelectEngine: the engine is each side's label
	}
	if k.Target != "" {
		// A foreign target: no version, switches or world of ours.
		return append(f, [2]string{"target", k.Target}, [2]string{"profile", k.Profile})
	}
	return append(f,
		[2]string{"version", k.Version},
		[2]string{"switches", k.Switches},
		[2]string{"world", k.World},
		[2]string{"profile", k.Profile})
}

// String is the full key, e.g.
// "fanout/branches=256/version=resilient/switches=none/world=nats/profile=none".
func (k CellKey) String() string {
	f := k.fields()
	parts := []string{f[0][1]}
	for _, kv := range f[1:] {
		parts = append(parts, kv[0]+"="+kv[1])
	}
	return strings.Join(parts, "/")
}

// Get returns the key's value for a selector field name (scenario, branches,
// steps, options, target, version, switches, world, profile; target is
// "reference" for the built-in engine).
func (k CellKey) Get(field string) (string, bool) {
	switch field {
	case "target":
		if k.Target == "" {
			return "reference", true
		}
		return k.Target, true
	case "scenario":
		return k.Scenario, true
	case "branches":
		return strconv.Itoa(k.Branches), true
	case "steps":
		return strconv.Itoa(k.Steps), true
	case "options":
		return k.Options, true
	case "version":
		return k.Version, true
	case "switches":
		return k.Switches, true
	case "world":
		return k.World, true
	case "profile":
		return k.Profile, true
	}
	return "", false
}

func (k CellKey) cmp(o CellKey) int {
	if c := strings.Compare(k.Scenario, o.Scenario); c != 0 {
		return c
	}
	if k.Branches != o.Branches {
		return k.Branches - o.Branches
	}
	if k.Steps != o.Steps {
		return k.Steps - o.Steps
	}
	for _, p := range [][2]string{{k.Options, o.Options}, {k.Target, o.Target}, {k.Version, o.Version}, {k.Switches, o.Switches}, {k.World, o.World}, {k.Profile, o.Profile}} {
		if c := strings.Compare(p[0], p[1]); c != 0 {
			return c
		}
	}
	return 0
}

// cellLabels returns a short label per key that names only the fields that
// differ between keys, and the fields every key shares (e.g.
// "world=sim profile=cloud"), so tables stay narrow.
func cellLabels(keys []CellKey) (labels []string, common string) {
	if len(keys) == 0 {
		return nil, ""
	}
	first := keys[0].fields()
	varies := map[string]bool{}
	for _, k := range keys[1:] {
		f := k.fields()
		seen := map[string]string{}
		for _, kv := range f {
			seen[kv[0]] = kv[1]
		}
		for _, kv := range first {
			if seen[kv[0]] != kv[1] {
				varies[kv[0]] = true
			}
			delete(seen, kv[0])
		}
		for name := range seen {
			varies[name] = true
		}
	}
	var commonParts []string
	for _, kv := range first {
		if !varies[kv[0]] {
			commonParts = append(commonParts, kv[0]+"="+kv[1])
		}
	}
	labels = make([]string, len(keys))
	for i, k := range keys {
		var parts []string
		for _, kv := range k.fields() {
			if !varies[kv[0]] {
				continue
			}
			if kv[0] == "scenario" {
				parts = append(parts, kv[1])
			} else {
				parts = append(parts, kv[0]+"="+kv[1])
			}
		}
		if len(parts) == 0 {
			parts = []string{k.Scenario}
		}
		labels[i] = strings.Join(parts, "/")
	}
	return labels, strings.Join(commonParts, " ")
}

// CompareOptions tunes Compare. The zero value is the default.
type CompareOptions struct {
	// Alpha is the significance level; 0 means Alpha (0.05).
	Alpha float64
	// Confidence is the confidence level of the median intervals; 0 means
	// Confidence (0.95).
	Confidence float64
	// Metrics restricts the comparison to these metric names; empty means
	// every metric either side has.
	Metrics []string
	// BaseLabel and HeadLabel name the two sides in reports (e.g. the file
	// names); empty means the short git commit, else "base" / "head".
	BaseLabel, HeadLabel string
	// Null is a second sweep of the baseline (same commit, same machine,
	// same settings): each row then shows the null Δ, base against Null,
	// beside Δ, and a significant Δ no larger than it is "within null".
	Null      *results.File
	NullLabel string
}

// Comparison is the statistical comparison of a head sweep against a base
// sweep.
type Comparison struct {
	Base, Head        SweepInfo
	Alpha, Confidence float64
	// Metrics holds one table per metric, in the conventional metric order
	// (ttfs, ttls, skew, stso..., then alphabetical).
	Metrics []MetricComparison
	// Counts compares runs, errors and stalls of every cell, present on
	// either side.
	Counts []CountRow
	// OnlyBase and OnlyHead are the cells present on one side only.
	OnlyBase, OnlyHead []CellKey
	// Null is the null sweep (CompareOptions.Null); HasNull is false
	// without one.
	Null    SweepInfo
	HasNull bool
	// Warnings name plan settings that differ between the sweeps and are
	// not part of a cell's key (pacing, queue settings, ...): the numbers
	// are compared, but the difference may explain a change.
	Warnings []string
	// Interleave is the interleaved sweep whose two sides are compared
	// (SplitSides) when some rows are paired (MetricRow.Paired); nil
	// otherwise.
	Interleave *results.Interleave
}

// planWarnings lists the settings outside the cell key that differ between
// base and head.
func planWarnings(base, head *results.File) []string {
	var w []string
	diff := func(name string, b, h any) {
		if b != h {
			w = append(w, fmt.Sprintf("%s differs: base %v, head %v", name, orNone(b), orNone(h)))
		}
	}
	bp, hp := base.Plan, head.Plan
	diff("pace", bp.Pace, hp.Pace)
	diff("concurrency", bp.Concurrency, hp.Concurrency)
	diff("rate", bp.Rate, hp.Rate)
	diff("warm-up runs", bp.Warmup, hp.Warmup)
	diff("retry style", bp.WorldOptions.RetryStyle, hp.WorldOptions.RetryStyle)
	diff("visibility timeout (ms)", bp.WorldOptions.VisibilityTimeoutMS, hp.WorldOptions.VisibilityTimeoutMS)
	diff("guard", bp.WorldOptions.Guard, hp.WorldOptions.Guard)
	diff("spans", spansWord(&bp), spansWord(&hp))
	diff("sim log model", bp.WorldOptions.SimLog, hp.WorldOptions.SimLog)
	diff("virtual time", base.VirtualTime, head.VirtualTime)
	diff("reps", bp.Reps, hp.Reps)
	diff("cell timeout (ms)", bp.CellTimeoutMS, hp.CellTimeoutMS)
	diff("stall threshold (ms)", bp.StallThresholdMS, hp.StallThresholdMS)
	diff("faults", bp.Options["faults"], hp.Options["faults"])
	diff("workers", bp.Workers, hp.Workers)
	diff("NATS server", bp.WorldOptions.NATSURL, hp.WorldOptions.NATSURL)
	diff("NATS storage", bp.WorldOptions.NATSStorage, hp.WorldOptions.NATSStorage)
	diff("NATS replicas", bp.WorldOptions.NATSReplicas, hp.WorldOptions.NATSReplicas)
	diff("PostgreSQL server", bp.WorldOptions.PostgresURL, hp.WorldOptions.PostgresURL)
	diff("PostgreSQL fsync", bp.WorldOptions.PostgresFsync, hp.WorldOptions.PostgresFsync)
	if !base.VirtualTime || !head.VirtualTime {
		// Wall-clock figures depend on the machine; simulated ones do not.
		if base.Host.CPUs != head.Host.CPUs || base.Host.OS != head.Host.OS || base.Host.Arch != head.Host.Arch {
			w = append(w, fmt.Sprintf("host differs: base %d CPUs %s/%s, head %d CPUs %s/%s",
				base.Host.CPUs, base.Host.OS, base.Host.Arch, head.Host.CPUs, head.Host.OS, head.Host.Arch))
		}
		if base.Host.Hostname != "" && head.Host.Hostname != "" {
			diff("host name", base.Host.Hostname, head.Host.Hostname)
		}
		diff("Go", base.Host.Go, head.Host.Go)
	}
	w = append(w, matrixWarnings(base, head)...)
	return append(w, cellWarnings(base, head)...)
}

// matrixWarnings names the engines, worlds and profiles one side measured
// and the other did not: their cells are never matched (they are listed as
// one-sided), so a comparison across them must say so. Files whose engines
// were selected (SelectEngine) compare engines on purpose.
func matrixWarnings(base, head *results.File) []string {
	sets := func(f *results.File) (engines, worlds, profiles []string) {
		for i := range f.Cells {
			c := &f.Cells[i]
			if c.Target == selected {
				return nil, nil, nil
			}
			engine := c.Target // versions of the built-in engine are one engine
			if engine == "" {
				engine = "reference"
			}
			engines = appendNew(engines, engine)
			if c.World != "" {
				worlds = appendNew(worlds, c.World)
			}
			profiles = appendNew(profiles, c.Profile)
		}
		return engines, worlds, profiles
	}
	be, bw, bp := sets(base)
	he, hw, hp := sets(head)
	if be == nil || he == nil {
		return nil
	}
	var w []string
	for _, d := range []struct {
		name string
		b, h []string
	}{{"engines", be, he}, {"worlds", bw, hw}, {"profiles", bp, hp}} {
		slices.Sort(d.b)
		slices.Sort(d.h)
		if !slices.Equal(d.b, d.h) {
			w = append(w, fmt.Sprintf("%s differ: base %s, head %s (cells of one side only are not compared)",
				d.name, strings.Join(d.b, ","), strings.Join(d.h, ",")))
		}
	}
	return w
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// orNone renders an empty setting as "(none)".
func orNone(v any) any {
	if s, ok := v.(string); ok && s == "" {
		return "(none)"
	}
	return v
}

// cellWarnings lists, per cell both sides have, what differs that the key
// does not hold: the foreign engine's name or version as it reported them,
// the class of the bound on its clock error, and how much processor time
// the machine's host took (steal).
func cellWarnings(base, head *results.File) []string {
	var w []string
	bIdx, _ := indexCells(base)
	hIdx, keys := indexCells(head)
	slices.SortFunc(keys, CellKey.cmp)
	for _, k := range keys {
		b, h := bIdx[k], hIdx[k]
		if b == nil {
			continue
		}
		if k.Target != selected {
			if b.Engine != h.Engine {
				w = append(w, fmt.Sprintf("engine differs in %s: base %q, head %q", k, b.Engine, h.Engine))
			} else if b.EngineVersion != h.EngineVersion {
				w = append(w, fmt.Sprintf("engine version differs in %s: base %q, head %q (compare engines explicitly with --base-engine/--head-engine)", k, b.EngineVersion, h.EngineVersion))
			}
		}
		if bc, hc := clockClass(b.ClockErrorUS), clockClass(h.ClockErrorUS); bc != hc {
			w = append(w, fmt.Sprintf("clock bound class differs in %s: base %s, head %s", k, bc, hc))
		}
		if bs, hs, ok := stealDiffers(b, h); ok {
			w = append(w, fmt.Sprintf("host steal differs in %s: base %.2f cores, head %.2f (the virtual machine's host took its vCPUs from one side more: its real-time figures, tails first, are the host's as much as the engine's)", k, bs, hs))
		}
	}
	return w
}

// StealDiffers is how far apart (in cores) the processor time the
// machine's host took from its vCPUs during a cell may be on the two
// sides of a comparison before it warns, if one side's is also more than
// twice the other's: a tenth of a vCPU taken stalls the pacer, the engine
// or the target for a tenth of every second somewhere, and a host that
// took about as much from both sides (0.36 and 0.48 cores) made both
// noisy alike, which a null sweep shows.
const StealDiffers = 0.10

// stealDiffers returns what the host took during cell b and cell h
// (results.CellCPU's StealCores), and whether the two differ enough to
// warn (StealDiffers); never when one of them did not record it.
func stealDiffers(b, h *results.Cell) (bs, hs float64, differ bool) {
	if b.CPU == nil || h.CPU == nil || b.CPU.StealCores == nil || h.CPU.StealCores == nil {
		return 0, 0, false
	}
	bs, hs = *b.CPU.StealCores, *h.CPU.StealCores
	lo, hi := min(bs, hs), max(bs, hs)
	return bs, hs, hi-lo >= StealDiffers && hi > 2*lo
}

// clockClass buckets a clock error bound (µs) by decade: figures taken
// with a bound ten times looser are not taken alike.
func clockClass(us float64) string {
	switch {
	case us == 0:
		return "same clock"
	case us < 100:
		return "< 100µs"
	case us < 1000:
		return "< 1ms"
	case us < 10000:
		return "< 10ms"
	}
	return "≥ 10ms"
}

// SweepInfo identifies one side of a comparison.
type SweepInfo struct {
	Label            string
	Commit           string
	DurabenchVersion string
	StartedAt        time.Time
	VirtualTime      bool
	// Partial is set when that sweep did not finish every planned cell.
	Partial bool
	Error   string
}

// MetricComparison is one metric's rows and its geomean.
type MetricComparison struct {
	Metric string
	Rows   []MetricRow
	// Geomean summarises the medians over every cell present, with a
	// non-zero median, on both sides.
	Geomean GeomeanRow
	// Shares compare the share of runs in the fast mode, per cell both
	// sides have, for a bimodal metric (metrics.Bimodal: TTFS); nil for
	// the others.
	Shares []ShareRow
}

// MetricRow compares one metric of one cell. Its summaries and its test
// are over the tested sample (Statistic, one value per Unit): for a metric
// with several samples per run, one aggregate per run.
type MetricRow struct {
	Cell CellKey
	// InBase and InHead tell which sides have the metric for this cell; a
	// missing side has a zero Summary.
	InBase, InHead bool
	Base, Head     Summary
	Test           Significance
	// DeltaPct is the change of the medians in percent (NaN when not both
	// sides have values, or the base median is 0 and the head's is not).
	DeltaPct float64
	// Statistic is what was tested (metrics.Statistic: "run value", "run
	// median", "run mean"; "pooled samples" for an older file), Unit what
	// one tested value is (UnitRun, or UnitSample on that fallback).
	Statistic, Unit string
	// InNull is set when the null sweep has the metric for this cell;
	// NullDeltaPct is then the change base → null of the medians (NaN
	// otherwise).
	InNull       bool
	Null         Summary
	NullDeltaPct float64
	// Verdict is VerdictSame, VerdictNoise, VerdictWorse, VerdictBetter,
	// VerdictChanged or VerdictNone.
	Verdict string
	// Paired is set when the two cells are the sides of one interleaved
	// pair: Test is then its signed-rank test over the blocks (N1 = N2 =
	// pairs) and DeltaPct its Hodges–Lehmann estimate of the change, with
	// the confidence interval in Paired.
	Paired *Paired
	// MDEPct is the minimum detectable effect in percent (α, power 0.8):
	// of the paired log ratios (MDEPaired), else of the two samples
	// (MDETwoSample); +Inf where the test can never reach α at these
	// sizes (SignedRankFloor, MannWhitneyFloor); NaN when a side has
	// fewer than 2 values.
	MDEPct float64
}

// Delta renders the change as benchstat does: "~" when not significant,
// else a signed percentage; "" when a side is missing. A paired row
// carries its interval: "+3.10% [+1.20, +5.00]", "~ (+0.40% [-1.10,
// +1.90])".
func (r MetricRow) Delta() string {
	if !r.InBase || !r.InHead || r.Base.N == 0 || r.Head.N == 0 {
		return ""
	}
	if r.Paired != nil {
		lo, hi := r.Paired.CIPct()
		ci := fmt.Sprintf("%+.2f%% [%+.2f, %+.2f]%s", r.DeltaPct, lo, hi, r.Paired.Coverage(r.Test.Alpha))
		switch {
		case !r.Test.Significant:
			return "~ (" + ci + ")"
		case r.Verdict == VerdictNoise:
			return "~ (" + ci + " ≤ null)"
		}
		return ci
	}
	if !r.Test.Significant {
		return "~"
	}
	if r.Verdict == VerdictNoise {
		return fmt.Sprintf("~ (%+.2f%% ≤ null)", r.DeltaPct)
	}
	if math.IsNaN(r.DeltaPct) {
		return "?"
	}
	return fmt.Sprintf("%+.2f%%", r.DeltaPct)
}

// GeomeanRow is the geometric mean of the medians of a metric over cells.
type GeomeanRow struct {
	Base, Head float64
	DeltaPct   float64
	// Cells is how many cells went into it; Excluded counts cells on both
	// sides that could not (a zero median).
	Cells, Excluded int
}

// CountRow compares the run, error and stall counts of one cell.
type CountRow struct {
	Cell           CellKey
	InBase, InHead bool
	Base, Head     CellCounts
}

// CellCounts are a cell's run outcome counts.
type CellCounts struct {
	Runs, Errors, Stalls int
}

// metricOrder is the order metrics are reported in: the reference's reading
// order, then anything else alphabetically.
var metricOrder = []string{"ttfs", "ttls", "skew", "skew_offset", "stso", "stso_inline", "stso_queue", "wo", "ttc", "sl", "so"}

func metricRank(name string) int {
	if i := slices.Index(metricOrder, name); i >= 0 {
		return i
	}
	if i, ok := pathRank(name); ok {
		return len(metricOrder) + 1 + i // after every other metric, in report order
	}
	return len(metricOrder)
}

func sortMetrics(names []string) {
	sort.Slice(names, func(i, j int) bool {
		ri, rj := metricRank(names[i]), metricRank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
}

func sweepInfo(f *results.File, label, fallback string) SweepInfo {
	if label == "" {
		label = shortCommit(f.GitCommit)
	}
	if label == "" {
		label = fallback
	}
	return SweepInfo{
		Label: label, Commit: f.GitCommit, DurabenchVersion: f.DurabenchVersion,
		StartedAt: f.StartedAt, VirtualTime: f.VirtualTime, Partial: f.Partial, Error: f.Error,
	}
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// rowVerdict judges a row of the metric name with values on both sides:
// up is worse for a metric whose lower is better, and an informational
// metric's change is only a change (metrics.Def.Better).
func rowVerdict(name string, r MetricRow) string {
	switch {
	case !r.Test.Significant:
		return VerdictSame
	case !math.IsNaN(r.DeltaPct) && !beyondNull(r.DeltaPct, r.NullDeltaPct):
		return VerdictNoise
	case metrics.BetterOf(name) == metrics.Informational:
		return VerdictChanged
	case r.Paired != nil && r.Paired.Ratio > 1:
		return VerdictWorse
	case r.Paired == nil && r.Head.Median > r.Base.Median:
		return VerdictWorse
	}
	return VerdictBetter
}

// checkNull refuses a null sweep that is not the baseline swept again: it
// must be comparable with the baseline and hold the same cells.
func checkNull(base, null *results.File) error {
	if err := checkComparable(base, null); err != nil {
		return fmt.Errorf("--null: %w", err)
	}
	nIdx, _ := indexCells(null)
	for i := range base.Cells {
		if k := KeyOf(&base.Cells[i]); nIdx[k] == nil {
			return fmt.Errorf("%w: --null: the null sweep lacks the baseline's cell %s: it must sweep the baseline's matrix again", ErrRules, k)
		}
	}
	return nil
}

// checkComparable refuses files whose numbers cannot be compared.
func checkComparable(base, head *results.File) error {
	if base == nil || head == nil {
		return fmt.Errorf("compare: %w: missing results file", ErrRules)
	}
	if base.Methodology != head.Methodology {
		return fmt.Errorf("%w: base has methodology %d, head has %d; re-run the baseline with this durabench", ErrMethodology, base.Methodology, head.Methodology)
	}
	return nil
}

// indexCells maps each cell key of f to its cell. A key seen twice keeps
// the first cell (a well-formed file has unique keys).
func indexCells(f *results.File) (map[CellKey]*results.Cell, []CellKey) {
	idx := make(map[CellKey]*results.Cell, len(f.Cells))
	var keys []CellKey
	for i := range f.Cells {
		k := KeyOf(&f.Cells[i])
		if _, dup := idx[k]; dup {
			continue
		}
		idx[k] = &f.Cells[i]
		keys = append(keys, k)
	}
	return idx, keys
}

// Compare compares head against base cell by cell: per metric the median
// and its confidence interval on each side, the Mann-Whitney U test of the
// per-run values, the change of the medians and a geomean row; per cell
// the run, error and stall counts. Cells on one side only are listed, never
// dropped. It refuses (ErrMethodology) files measured with different
// methodology.
func Compare(base, head *results.File, opt CompareOptions) (*Comparison, error) {
	if err := checkComparable(base, head); err != nil {
		return nil, err
	}
	if opt.Alpha == 0 {
		opt.Alpha = Alpha
	}
	if opt.Confidence == 0 {
		opt.Confidence = Confidence
	}
	c := &Comparison{
		Base:       sweepInfo(base, opt.BaseLabel, "base"),
		Head:       sweepInfo(head, opt.HeadLabel, "head"),
		Alpha:      opt.Alpha,
		Confidence: opt.Confidence,
		Warnings:   planWarnings(base, head),
	}
	var nIdx map[CellKey]*results.Cell
	if opt.Null != nil {
		if err := checkNull(base, opt.Null); err != nil {
			return nil, err
		}
		c.Null, c.HasNull = sweepInfo(opt.Null, opt.NullLabel, "null"), true
		for _, w := range planWarnings(base, opt.Null) {
			c.Warnings = append(c.Warnings, "null sweep: "+w)
		}
		nIdx, _ = indexCells(opt.Null)
	}
	pooled := pooledSides{}
	bIdx, bKeys := indexCells(base)
	hIdx, hKeys := indexCells(head)
	all := slices.Clone(bKeys)
	for _, k := range hKeys {
		if _, ok := bIdx[k]; !ok {
			all = append(all, k)
			c.OnlyHead = append(c.OnlyHead, k)
		}
	}
	for _, k := range bKeys {
		if _, ok := hIdx[k]; !ok {
			c.OnlyBase = append(c.OnlyBase, k)
		}
	}
	slices.SortFunc(all, CellKey.cmp)
	slices.SortFunc(c.OnlyBase, CellKey.cmp)
	slices.SortFunc(c.OnlyHead, CellKey.cmp)

	want := map[string]bool{}
	for _, m := range opt.Metrics {
		want[m] = true
	}
	names := map[string]bool{}
	for _, k := range all {
		for _, cell := range []*results.Cell{bIdx[k], hIdx[k]} {
			if cell == nil {
				continue
			}
			for m := range cell.Metrics {
				if len(want) == 0 || want[m] {
					names[m] = true
				}
			}
			for _, m := range pathMetrics(cell) {
				if len(want) == 0 || want[m] || want[pathAll] {
					names[m] = true
				}
			}
			for _, m := range completionMetrics(cell) {
				if want[m] || want[completionAll] {
					names[m] = true
				}
			}
		}
	}
	metricNames := slices.Collect(maps.Keys(names))
	sortMetrics(metricNames)

	for _, name := range metricNames {
		mc := MetricComparison{Metric: name}
		var gb, gh []float64
		for _, k := range all {
			row := MetricRow{Cell: k, DeltaPct: math.NaN(), NullDeltaPct: math.NaN(), Verdict: VerdictNone,
				Test: Significance{P: math.NaN(), Alpha: opt.Alpha}, MDEPct: math.NaN()}
			side := func(idx map[CellKey]*results.Cell, label string) (in bool, t tested, sum Summary) {
				m := metricOf(idx[k], name)
				if m == nil {
					return false, t, sum
				}
				t = testedSample(name, *m)
				pooled.add(label, name, t)
				return true, t, Summarize(t.values, opt.Confidence)
			}
			var bt, ht tested
			row.InBase, bt, row.Base = side(bIdx, "base")
			row.InHead, ht, row.Head = side(hIdx, "head")
			if !row.InBase && !row.InHead {
				continue
			}
			row.Statistic, row.Unit = ht.stat, ht.unit
			if !row.InHead || (row.InBase && bt.unit == UnitSample) {
				row.Statistic, row.Unit = bt.stat, bt.unit
			}
			bv, hv := bt.values, ht.values
			if nIdx != nil && row.InBase {
				var nt tested
				row.InNull, nt, row.Null = side(nIdx, "null")
				if row.InNull && len(nt.values) > 0 && len(bv) > 0 {
					row.NullDeltaPct = deltaPct(row.Base.Median, row.Null.Median)
				}
			}
			if row.InBase && row.InHead && len(bv) > 0 && len(hv) > 0 {
				if pt, ok := pairedOf(bIdx[k], hIdx[k], name, opt.Alpha); ok && pt.N > 0 {
					row.Paired = &pt
					row.Test = Significance{P: pt.P, Alpha: opt.Alpha, N1: pt.N, N2: pt.N, Significant: pt.Significant, Warnings: pt.Warnings}
					row.DeltaPct, row.MDEPct = pt.DeltaPct(), pt.MDEPct
					c.Interleave = head.Plan.Interleave
				} else {
					row.Test = MannWhitney(bv, hv, opt.Alpha)
					row.DeltaPct = deltaPct(row.Base.Median, row.Head.Median)
					row.MDEPct = MDEOf(bv, hv, opt.Alpha)
				}
				row.Verdict = rowVerdict(name, row)
				if row.Base.Median > 0 && row.Head.Median > 0 {
					gb = append(gb, row.Base.Median)
					gh = append(gh, row.Head.Median)
				} else {
					mc.Geomean.Excluded++
				}
			}
			mc.Rows = append(mc.Rows, row)
		}
		mc.Shares = shareRows(name, all, bIdx, hIdx, opt.Alpha)
		mc.Geomean.Cells = len(gb)
		mc.Geomean.Base, mc.Geomean.Head = Geomean(gb), Geomean(gh)
		mc.Geomean.DeltaPct = math.NaN()
		if len(gb) > 0 {
			mc.Geomean.DeltaPct = deltaPct(mc.Geomean.Base, mc.Geomean.Head)
		}
		c.Metrics = append(c.Metrics, mc)
	}

	c.Warnings = append(c.Warnings, pooled.warnings()...)
	for _, k := range all {
		row := CountRow{Cell: k}
		if cell := bIdx[k]; cell != nil {
			row.InBase, row.Base = true, CellCounts{cell.Runs, cell.Errors, cell.Stalls}
		}
		if cell := hIdx[k]; cell != nil {
			row.InHead, row.Head = true, CellCounts{cell.Runs, cell.Errors, cell.Stalls}
		}
		c.Counts = append(c.Counts, row)
	}
	return c, nil
}

// spansWord is a plan's --spans: on (spans recorded: each cell's
// critical_path, and their cost in its other figures) or off.
func spansWord(p *results.PlanRecord) string {
	if p.NoSpans() {
		return "off"
	}
	return "on"
}
