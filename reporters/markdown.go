package reporters

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Marks used in the markdown report; the footer explains each.
const (
	markWorse     = "🔺" // a percentile more than markThreshold% above the baseline
	markBetter    = "🟢" // a percentile more than markThreshold% below the baseline
	markOver      = "🔴" // a percentile over its target
	markNoise     = "~" // the change is not statistically significant
	markStall     = "⚠️"
	markError     = "❌"
	markPartial   = "⚠️"
	markThreshold = 15.0
)

// Title is the header of the markdown report and the GitHub comment.
const Title = "Durable Workflow Benchmarks"

// Markdown writes f as a markdown report: per scenario a table of every
// metric and cell (best, p50, p75, p90, p99, n) with changes against
// opt.Baseline, target and significance marks, stalls and errors, and
// collapsed text histograms; then collapsed previous results (opt.History)
// and metric definitions. With opt.GitHub it writes a pull-request comment
// instead (see Options.GitHub).
func Markdown(w io.Writer, f *results.File, opt Options) error {
	var body string
	if opt.GitHub {
		var err error
		if body, err = githubBody(f, opt); err != nil {
			return err
		}
	} else {
		body = newMarkdown(f, opt).render(fullDetail(opt))
	}
	_, err := io.WriteString(w, body)
	return err
}

// detail is how much of the optional content a rendering includes; the
// GitHub comment lowers it step by step to fit the size limit.
type detail struct {
	history    int  // previous results shown, newest first
	histograms bool // collapsed text histograms
	// widestOnly limits histograms to each scenario's widest cells (most
	// branches, most steps), where a regression shows first.
	widestOnly bool
	runDetail  bool // stalled and failed run ids and error messages
	maxRows    int  // table rows per scenario; 0 means all
	// embedHDR keeps the encoded histograms in the embedded results copy.
	embedHDR bool
	// trimmed notes what was left out, for the reader.
	trimmed []string
}

func fullDetail(opt Options) detail {
	return detail{history: len(opt.History), histograms: true, runDetail: true, embedHDR: true}
}

type sigKey struct {
	cell   stats.CellKey
	metric string
}

// markdown holds what every rendering of one report shares.
type markdown struct {
	f    *results.File
	opt  Options
	base map[stats.CellKey]*results.Cell
	// sig holds the Mann-Whitney test per cell and metric, from
	// stats.Compare, where both sides kept per-run values.
	sig     map[sigKey]stats.Significance
	lab     labeler
	groups  []scenarioGroup
	history []*results.File // newest first
	now     time.Time
	// comparable is false when the baseline was measured with another
	// methodology, so deltas would mislead.
	comparable bool
	// null holds each row's null Δ (stats.MetricRow.NullDeltaPct) when
	// opt.Null is set and compares.
	null map[sigKey]float64
	// warnings are what differs between the baseline and this run besides
	// the change under test (stats.Comparison.Warnings), shown at the top.
	warnings []string
	// shares holds the fast-mode share rows of bimodal metrics (TTFS), by
	// cell and metric, from stats.Compare.
	shares map[sigKey]stats.ShareRow
	// cmp is the comparison the detection rows come from (detection.go):
	// against the baseline, or of an interleaved sweep's two sides;
	// pairHeads the latter's head cells by the comparison's keys.
	cmp       *stats.Comparison
	pairHeads map[stats.CellKey]*results.Cell
}

func newMarkdown(f *results.File, opt Options) *markdown {
	m := &markdown{f: f, opt: opt, lab: newLabeler(f), groups: groupScenarios(f), now: opt.now()}
	if opt.Baseline != nil && opt.Baseline.Methodology == f.Methodology {
		m.base = cellIndex(opt.Baseline)
		m.comparable = true
		cmp, err := stats.Compare(opt.Baseline, f, stats.CompareOptions{Null: opt.Null})
		if err != nil && opt.Null != nil {
			m.warnings = append(m.warnings, "the null sweep is not used: "+err.Error())
			cmp, err = stats.Compare(opt.Baseline, f, stats.CompareOptions{})
		}
		if err == nil {
			m.cmp = cmp
			m.warnings = append(m.warnings, cmp.Warnings...)
			m.sig = map[sigKey]stats.Significance{}
			if cmp.HasNull {
				m.null = map[sigKey]float64{}
			}
			metricsCmp := cmp.Metrics
			if hasTail(f) {
				// The path to completion's categories, which compare
				// lists only when asked: the marks of their table.
				o := stats.CompareOptions{Metrics: []string{metrics.CompletionPathMetric}}
				if cmp.HasNull {
					o.Null = opt.Null
				}
				if tc, err := stats.Compare(opt.Baseline, f, o); err == nil {
					metricsCmp = append(slices.Clone(metricsCmp), tc.Metrics...)
				}
			}
			for _, mc := range metricsCmp {
				for _, r := range mc.Shares {
					if m.shares == nil {
						m.shares = map[sigKey]stats.ShareRow{}
					}
					m.shares[sigKey{r.Cell, mc.Metric}] = r
				}
				for _, r := range mc.Rows {
					if r.InBase && r.InHead && r.Base.N > 0 && r.Head.N > 0 {
						t := r.Test
						if r.Verdict == stats.VerdictNoise {
							t.Significant = false // within the null spread: noise
						}
						m.sig[sigKey{r.Cell, mc.Metric}] = t
					}
					if m.null != nil && r.InNull {
						m.null[sigKey{r.Cell, mc.Metric}] = r.NullDeltaPct
					}
				}
			}
		}
	}
	if opt.Baseline == nil {
		m.cmp, m.pairHeads = sidesComparison(f)
	}
	m.history = slices.Clone(opt.History)
	m.history = slices.DeleteFunc(m.history, func(h *results.File) bool { return h == nil })
	slices.SortStableFunc(m.history, func(a, b *results.File) int { return b.StartedAt.Compare(a.StartedAt) })
	return m
}

func (m *markdown) render(d detail) string {
	var sb strings.Builder
	if m.opt.GitHub {
		sb.WriteString(Marker + "\n")
	}
	m.header(&sb)
	m.engines(&sb)
	for _, g := range m.groups {
		m.scenario(&sb, g, d)
	}
	if len(m.groups) == 0 {
		sb.WriteString("\n_No cells in this results file._\n")
	}
	if d.history > 0 && len(m.history) > 0 {
		m.previous(&sb, d.history)
	}
	m.footer(&sb)
	if len(d.trimmed) > 0 {
		fmt.Fprintf(&sb, "\n_Trimmed to fit GitHub's comment size limit: %s left out; the uploaded artifacts have everything._\n",
			strings.Join(d.trimmed, ", "))
	}
	return sb.String()
}

func shortCommit(c string) string {
	if c == "" {
		return "(no commit)"
	}
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

func (m *markdown) header(sb *strings.Builder) {
	f := m.f
	title := "## 📊 " + Title
	if f.Partial {
		title += " — " + markPartial + " PARTIAL RESULTS"
	} else if m.opt.GitHub {
		title += " — ✅ " + string(StatusCompleted)
	}
	sb.WriteString(title + "\n\n")
	if f.Partial {
		fmt.Fprintf(sb, "> [!WARNING]\n> **Partial results: the sweep did not finish.** Only %d cell(s) are present; "+
			"planned cells that are missing are not shown, so this report is incomplete.", len(f.Cells))
		if f.Error != "" {
			fmt.Fprintf(sb, " Error: `%s`.", oneLine(f.Error, 200))
		}
		if n := len(f.Missing); n > 0 {
			shown := f.Missing[:min(n, 10)]
			fmt.Fprintf(sb, "\n> Missing (%d): `%s`", n, strings.Join(shown, "`, `"))
			if n > len(shown) {
				fmt.Fprintf(sb, ", … %d more", n-len(shown))
			}
			sb.WriteString(".")
		}
		sb.WriteString("\n\n")
	}
	if f.VirtualTime {
		sb.WriteString("> ⏱ **Virtual time.** Every figure is simulated time from the deterministic sim world, not wall-clock time.\n\n")
	}
	p := f.Plan
	var meta []string
	meta = append(meta, "commit `"+shortCommit(f.GitCommit)+"`")
	if f.DurabenchVersion != "" {
		meta = append(meta, "durabench "+f.DurabenchVersion)
	}
	// A target cell runs on the target's world, not durabench's: a sweep
	// of targets only names theirs.
	tw, onlyTargets := targetWorlds(f)
	if !onlyTargets {
		meta = append(meta, "world "+strings.Join(p.Worlds, ", "), "profile "+strings.Join(p.Profiles, ", "))
	}
	meta = append(meta, tw...)
	pace := p.Pace
	switch {
	case p.Pace == "closed" && p.Concurrency > 0:
		pace += fmt.Sprintf(" (%d in flight)", p.Concurrency)
	case p.Pace == "open" && p.Rate > 0:
		pace += fmt.Sprintf(" (%g runs/s)", p.Rate)
	}
	if pace != "" {
		meta = append(meta, pace)
	}
	meta = append(meta, fmt.Sprintf("%d reps + %d warm-up", p.Reps, p.Warmup))
	if p.Seed != 0 {
		meta = append(meta, fmt.Sprintf("seed %d", p.Seed))
	}
	host := fmt.Sprintf("%d CPUs %s", f.Host.CPUs, f.Host.OS)
	if f.Host.Arch != "" {
		host += "/" + f.Host.Arch
	}
	if f.Host.Go != "" {
		host += " " + f.Host.Go
	}
	meta = append(meta, host, "started "+f.StartedAt.UTC().Format("2006-01-02 15:04 UTC"))
	sb.WriteString(strings.Join(meta, " · ") + "\n\n")
	if b := m.opt.Baseline; b != nil {
		if m.comparable {
			fmt.Fprintf(sb, "Changes are against the baseline `%s` (started %s)", shortCommit(b.GitCommit),
				b.StartedAt.UTC().Format("2006-01-02 15:04 UTC"))
			if b.Partial {
				sb.WriteString(", itself **partial**")
			}
			sb.WriteString(".")
			// A cell that disappeared must not go unnoticed.
			head := cellIndex(f)
			var gone []string
			for i := range b.Cells {
				if head[cellKey(&b.Cells[i])] == nil {
					gone = append(gone, "`"+b.Cells[i].Scenario+" · "+m.lab.label(&b.Cells[i])+"`")
				}
			}
			if len(gone) > 0 {
				if len(gone) > 8 {
					gone = append(gone[:8], fmt.Sprintf("… %d more", len(gone)-8))
				}
				fmt.Fprintf(sb, " Cells in the baseline but not in this run: %s.", strings.Join(gone, ", "))
			}
			sb.WriteString("\n\n")
			if len(m.warnings) > 0 {
				sb.WriteString("> ⚠️ **Read the changes with care:**\n")
				for _, w := range m.warnings {
					sb.WriteString("> - " + w + "\n")
				}
				sb.WriteString("\n")
			}
		} else {
			fmt.Fprintf(sb, "> The baseline `%s` was measured with methodology %d and this run with %d: they are not compared.\n\n",
				shortCommit(b.GitCommit), b.Methodology, f.Methodology)
		}
	}
}

// scenario writes one scenario's table, stalls, errors and histograms.
func (m *markdown) scenario(sb *strings.Builder, g scenarioGroup, d detail) {
	fmt.Fprintf(sb, "### %s\n\n", g.Name)
	if m.null != nil {
		sb.WriteString("| metric | cell | best | p50 | p75 | p90 | p99 | null Δ | n |\n")
		sb.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	} else {
		sb.WriteString("| metric | cell | best | p50 | p75 | p90 | p99 | n |\n")
		sb.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
	}
	rows := 0
	omitted := 0
	names := orderedMetrics(g.Cells)
	if hasDriverLag(g.Cells) {
		// Driver lag goes next to TTFS (first when there is none).
		at := slices.Index(names, "ttfs") + 1
		names = slices.Insert(slices.Clone(names), at, driverLagRow)
	}
	for _, name := range names {
		if tableSkip[name] {
			continue
		}
		first := true
		for _, c := range g.Cells {
			mt, ok := c.Metrics[name]
			if name == driverLagRow && c.DriverLag != nil {
				mt, ok = *c.DriverLag, true
			}
			if !ok {
				continue
			}
			if d.maxRows > 0 && rows >= d.maxRows {
				omitted++
				continue
			}
			rows++
			title := ""
			if first {
				title = "**" + metricTitle(name) + "**"
				first = false
			}
			sb.WriteString("| " + title + " | " + m.lab.label(c) + " | " + m.row(c, name, mt) + " |\n")
		}
	}
	if omitted > 0 {
		fmt.Fprintf(sb, "\n_%d more row(s) left out to fit the comment; see the uploaded results._\n", omitted)
	}
	if ws := append(cutWarnings(m.f, g.Cells, m.lab), lagWarnings(g.Cells, m.lab)...); len(ws) > 0 {
		sb.WriteString("\n")
		for _, w := range ws {
			sb.WriteString("⚠ " + w + ".  \n")
		}
	}
	m.fastShares(sb, g, names)
	m.incidents(sb, g, d)
	m.slopes(sb, g)
	m.crtt(sb, g)
	m.pathMarkdown(sb, g, d)
	m.detection(sb, g, d)
	if d.histograms {
		m.histograms(sb, g, d.widestOnly)
	}
	sb.WriteString("\n")
}

// fastShares writes, for each bimodal metric (TTFS) of the group's cells,
// the share of runs in the fast mode against the baseline's: runs under
// stats.FastFactor × the fastest run of either side, compared with
// Fisher's exact test. Fewer fast runs, significantly, is worse.
func (m *markdown) fastShares(sb *strings.Builder, g scenarioGroup, names []string) {
	for _, name := range names {
		var rows []string
		same := 0
		for _, c := range g.Cells {
			r, ok := m.shares[sigKey{cellKey(c), name}]
			if !ok {
				continue
			}
			if r.BaseFast*r.HeadN == r.HeadFast*r.BaseN {
				same++ // the same share: a row would say nothing
				continue
			}
			delta := markNoise
			if r.Significant {
				delta = fmt.Sprintf("%+.0f pp", r.DeltaPP)
				switch {
				case metrics.BetterOf(name) != metrics.Lower:
				case r.DeltaPP < 0:
					delta += " " + markWorse
				case r.DeltaPP > 0:
					delta += " " + markBetter
				}
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %.3f |\n", m.lab.label(c), fmtUS(int64(r.ThresholdUS)),
				stats.FormatShare(r.BaseFast, r.BaseN), stats.FormatShare(r.HeadFast, r.HeadN), delta, r.P))
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(sb, "\n**%s fast mode**: runs under %d × the fastest run of either side, against the baseline (Fisher's exact test; %s: not significant)",
			metricTitle(name), stats.FastFactor, markNoise)
		if same > 0 {
			fmt.Fprintf(sb, "; %d more cell(s) kept their share", same)
		}
		sb.WriteString(".\n\n")
		sb.WriteString("| cell | under | baseline | this run | Δ | p |\n|---|--:|--:|--:|--:|--:|\n")
		for _, r := range rows {
			sb.WriteString(r)
		}
	}
}

// row renders best | p50 | p75 | p90 | p99 | n for one metric of a cell.
func (m *markdown) row(c *results.Cell, name string, mt results.Metric) string {
	if mt.Count == 0 {
		if m.null != nil {
			return "- | - | - | - | - | - | 0"
		}
		return "- | - | - | - | - | 0"
	}
	var bm *results.Metric
	if b := m.base[cellKey(c)]; b != nil {
		if x, ok := b.Metrics[name]; ok && x.Count > 0 {
			bm = &x
		}
	}
	// Significance needs per-run values on both sides; a baseline read back
	// from a comment carries none, and then marks rely on Δ% alone.
	var sig *stats.Significance
	if s, ok := m.sig[sigKey{cellKey(c), name}]; ok && bm != nil {
		sig = &s
	}
	targets := m.opt.targetsFor(m.f, c)
	target, hasTarget := targets[name]
	// An informational metric's change is shown, never marked better or
	// worse: a slower engine can lower it.
	judged := metrics.BetterOf(name) == metrics.Lower
	cell := func(v int64, bv func(*results.Metric) int64, ti int) string {
		s := fmtUS(v)
		if hasTarget && ti >= 0 && float64(v)/1000 > target[ti] {
			s = markOver + " " + s
		}
		// The best column keeps its value but no change: the fastest run
		// of a bimodal metric (TTFS) moves by hundreds of percent on a
		// no-op change.
		if bm != nil && bv != nil {
			base := float64(bv(bm))
			s += " " + deltaText(base, float64(v))
			if mk := deltaMark(base, float64(v)); mk != "" && (sig == nil || sig.Significant) && judged {
				s += " " + mk
			}
		}
		return s
	}
	cols := []string{
		cell(mt.Min, nil, -1),
		cell(mt.P50, func(b *results.Metric) int64 { return b.P50 }, -1),
		cell(mt.P75, func(b *results.Metric) int64 { return b.P75 }, 0),
		cell(mt.P90, func(b *results.Metric) int64 { return b.P90 }, 1),
		cell(mt.P99, func(b *results.Metric) int64 { return b.P99 }, 2),
	}
	n := fmt.Sprint(mt.Count)
	if sig != nil && !sig.Significant {
		n += " " + markNoise
	}
	if m.null != nil {
		// The null sweep's change of the tested per-run statistic's median.
		nd := "—"
		if d, ok := m.null[sigKey{cellKey(c), name}]; ok && !math.IsNaN(d) {
			nd = fmt.Sprintf("%+.0f%%", d)
		}
		cols = append(cols, nd)
	}
	return strings.Join(append(cols, n), " | ")
}

// deltaText is the change from base to cur as "(+12%)", "(-3%)" or "(±0%)"
// under half a percent.
func deltaText(base, cur float64) string {
	if base == 0 {
		if cur == 0 {
			return "(±0%)"
		}
		return "(new)"
	}
	d := (cur/base - 1) * 100
	if math.Abs(d) < 0.5 {
		return "(±0%)"
	}
	return fmt.Sprintf("(%+.0f%%)", d)
}

// deltaMark flags changes beyond ±markThreshold percent.
func deltaMark(base, cur float64) string {
	if base == 0 {
		return ""
	}
	// Rounded to a hundredth so float noise cannot push exactly -15% over.
	switch d := math.Round((cur/base-1)*10000) / 100; {
	case d > markThreshold:
		return markWorse
	case d < -markThreshold:
		return markBetter
	}
	return ""
}

// firstOf formats the first n items, then "… k more" for the rest.
func firstOf[T any](items []T, n int, format func(T) string) []string {
	var out []string
	for i, it := range items {
		if i == n {
			out = append(out, fmt.Sprintf("… %d more", len(items)-i))
			break
		}
		out = append(out, format(it))
	}
	return out
}

// incidents lists stalls, world incidents and errors of a scenario's cells.
func (m *markdown) incidents(sb *strings.Builder, g scenarioGroup, d detail) {
	var lines []string
	for _, c := range g.Cells {
		if c.Stalls == 0 {
			continue
		}
		s := fmt.Sprintf("%s **Stalls** in `%s`: %d of %d runs", markStall, m.lab.label(c), c.Stalls, c.Runs)
		if b := m.base[cellKey(c)]; b != nil {
			s += fmt.Sprintf(" (baseline: %d)", b.Stalls)
		}
		if d.runDetail && len(c.StalledRuns) > 0 {
			ids := firstOf(c.StalledRuns, 10, func(r results.StalledRun) string {
				t := "TTLS " + metrics.FormatMicros(r.TTLSMS*1000)
				switch {
				case r.NotStarted:
					t = "never started"
				case !r.Finished:
					t = "unfinished after " + metrics.FormatMicros(r.TTLSMS*1000)
				}
				return fmt.Sprintf("`%s` (%s)", r.Run, t)
			})
			s += " — " + strings.Join(ids, ", ")
		}
		lines = append(lines, s)
	}
	for _, c := range g.Cells {
		if c.Anomalies == 0 {
			continue
		}
		s := fmt.Sprintf("%s **Anomalies** in `%s`: %d of %d runs' histories", markError, m.lab.label(c), c.Anomalies, c.Runs)
		if d.runDetail && len(c.AnomalousRuns) > 0 {
			ids := firstOf(c.AnomalousRuns, 5, func(r results.AnomalousRun) string {
				var what []string
				for _, a := range r.Anomalies {
					what = append(what, oneLine(a.Kind+": "+a.Detail, 80))
				}
				return fmt.Sprintf("`%s` (%s)", r.Run, strings.Join(what, "; "))
			})
			s += " — " + strings.Join(ids, ", ")
		}
		lines = append(lines, s)
	}
	for _, c := range g.Cells {
		inc := c.WorldIncidents
		if inc == nil || inc.Total() == 0 {
			continue
		}
		s := fmt.Sprintf("%s **World incidents** in `%s`: %s", markError, m.lab.label(c), inc)
		if d.runDetail && inc.Last != "" {
			s += " — last: " + oneLine(inc.Last, 120)
		}
		lines = append(lines, s)
	}
	for _, c := range g.Cells {
		if c.Errors == 0 {
			continue
		}
		s := fmt.Sprintf("%s **Errors** in `%s`: %d of %d runs", markError, m.lab.label(c), c.Errors, c.Runs)
		if d.runDetail && len(c.FailedRuns) > 0 {
			ids := firstOf(c.FailedRuns, 3, func(r results.FailedRun) string {
				return fmt.Sprintf("`%s`: %s", r.Run, oneLine(r.Error, 120))
			})
			s += " — " + strings.Join(ids, "; ")
		}
		lines = append(lines, s)
	}
	lines = append(lines, workerLines(g, m.lab)...)
	lines = append(lines, targetLines(g, m.lab)...)
	if len(lines) > 0 {
		sb.WriteString("\n" + strings.Join(lines, "  \n") + "\n")
	}
}

// targetWorlds names each target of f's cells with the world it said it
// runs on; onlyTargets is set when no cell ran the built-in engine.
func targetWorlds(f *results.File) (out []string, onlyTargets bool) {
	seen := map[string]bool{}
	onlyTargets = len(f.Cells) > 0
	for i := range f.Cells {
		c := &f.Cells[i]
		if c.Target == "" {
			onlyTargets = false
			continue
		}
		if seen[c.Target] {
			continue
		}
		seen[c.Target] = true
		w := "its world unstated"
		if c.TargetWorld != "" {
			w = "world " + c.TargetWorld
		}
		out = append(out, fmt.Sprintf("target %s (%s)", c.Target, w))
	}
	return out, onlyTargets
}

// Target clock flags: a cell whose clock error bound or drift is over
// clockFlagUS, or over clockFlagShare of its TTLS p50, is flagged.
const (
	clockFlagUS    = 1000
	clockFlagShare = 0.25
)

// targetLines shows each target cell's clock (error bound and drift over
// the cell, flagging a cell where they matter) and its polls answered
// empty early.
func targetLines(g scenarioGroup, lab labeler) []string {
	var lines, fine []string
	for _, c := range g.Cells {
		if c.Target == "" || c.Skipped != "" || c.Runs == 0 {
			continue
		}
		worst := max(c.ClockErrorUS, math.Abs(c.ClockDriftUS))
		bound := fmt.Sprintf("± %s, drift %s", metrics.FormatMicros(c.ClockErrorUS), signedMicros(c.ClockDriftUS))
		ttls := float64(c.Metrics["ttls"].P50)
		switch {
		case worst > clockFlagUS:
			lines = append(lines, fmt.Sprintf("%s **Target clock** in `%s`: %s — over %s: its timestamps may be off by that much",
				markStall, lab.label(c), bound, metrics.FormatMicros(clockFlagUS)))
		case ttls > 0 && worst > clockFlagShare*ttls:
			lines = append(lines, fmt.Sprintf("%s **Target clock** in `%s`: %s — %.0f%% of TTLS p50 %s: its timestamps may be off by that much",
				markStall, lab.label(c), bound, 100*worst/ttls, metrics.FormatMicros(ttls)))
		default:
			fine = append(fine, "`"+lab.label(c)+"` "+bound)
		}
		if c.DroppedSpans > 0 {
			lines = append(lines, fmt.Sprintf("%s **Spans left out** in `%s`: %d span events durabench cannot place (the first: %s) — their time is `unattributed` on the critical path; `durabench target check` names the fault",
				markStall, lab.label(c), c.DroppedSpans, c.DroppedSpan))
		}
		if c.EarlyEmptyPolls > 0 {
			lines = append(lines, fmt.Sprintf("%s **Early empty polls** in `%s`: %d of %d timeline polls came back empty before "+
				"half their wait — the target does not hold long polls (durabench backed off after each)", markStall, lab.label(c),
				c.EarlyEmptyPolls, c.TargetPolls))
		}
	}
	if len(fine) > 0 {
		lines = append(lines, "🕐 **Target clocks**: "+strings.Join(fine, "; "))
	}
	return lines
}

// workerLines names the workers of distributed cells (sweep --workers
// external), with each one's clock offset and what it ran, and the cell's
// redeliveries (a lost worker's messages among them).
func workerLines(g scenarioGroup, lab labeler) []string {
	var lines []string
	for _, c := range g.Cells {
		if len(c.WorkerStats) == 0 {
			continue
		}
		var ws []string
		for _, w := range c.WorkerStats {
			s := fmt.Sprintf("`%s` (offset %s ± %s, %d steps", w.Worker, signedMicros(w.OffsetUS),
				metrics.FormatMicros(w.RTTUS/2), w.Steps)
			switch {
			case w.Lost:
				s += ", lost"
			case w.Left:
				s += ", left"
			}
			ws = append(ws, s+")")
		}
		lines = append(lines, fmt.Sprintf("👷 **Workers** in `%s`: %s; %d redeliveries", lab.label(c),
			strings.Join(ws, ", "), c.Redeliveries))
	}
	return lines
}

// signedMicros formats a possibly negative duration in microseconds with
// its sign, an ASCII hyphen-minus when negative (as every delta in the
// reports).
func signedMicros(us float64) string {
	if us < 0 {
		return metrics.FormatMicros(us)
	}
	return "+" + metrics.FormatMicros(us)
}

// slopes lists the STSO slope over the step index of sequential cells: the
// replay cost each extra event adds to every later step.
func (m *markdown) slopes(sb *strings.Builder, g scenarioGroup) {
	var parts []string
	for _, c := range g.Cells {
		if c.STSOSlopeUS == nil {
			continue
		}
		s := fmt.Sprintf("`%s` %s/step", m.lab.label(c), metrics.FormatMicros(*c.STSOSlopeUS))
		if b := m.base[cellKey(c)]; b != nil && b.STSOSlopeUS != nil {
			s += " " + deltaText(*b.STSOSlopeUS, *c.STSOSlopeUS)
		}
		parts = append(parts, s)
	}
	if len(parts) > 0 {
		sb.WriteString("\n**STSO slope** over the step index (replay cost per step of log): " + strings.Join(parts, " · ") + "\n")
	}
}

// crtt writes the CRTT-by-bucket table of the group's stream cells, their
// CRTT by chunk size and the replayed cadences' SHA-256.
func (m *markdown) crtt(sb *strings.Builder, g scenarioGroup) {
	sc := streamCells(g.Cells)
	if len(sc) == 0 {
		return
	}
	sb.WriteString("\n**Chunk round trips (CRTT) by chunk index**, with each run's delay variation, writer slip and steady rates:\n\n")
	for i, row := range crttTable(sc, m.lab) {
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sb.WriteString("|---" + strings.Repeat("|--:", len(row)-1) + "|\n")
		}
	}
	for _, l := range crttSizes(sc, m.lab) {
		sb.WriteString("\nCRTT by chunk size, " + l + "\n")
	}
	for _, l := range cadenceLines(sc) {
		sb.WriteString("\n`" + l + "`\n")
	}
}

// oneLine collapses whitespace and cuts s to at most n runes, so an error
// message cannot break a table or a list item.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "`", "'")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// histogramMetrics are the metrics a scenario draws histograms of: the STSO
// split when present (inline vs queue-hop tells replay cost from dispatch
// cost), otherwise the headline metric.
func histogramMetrics(cells []*results.Cell) []string {
	var out []string
	for _, name := range []string{"stso_inline", "stso_queue"} {
		if _, ok := firstMetric(cells, name); ok {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		if h := headlineMetric(cells); h != "" {
			out = append(out, h)
		}
	}
	return out
}

func (m *markdown) histograms(sb *strings.Builder, g scenarioGroup, widestOnly bool) {
	names := histogramMetrics(g.Cells)
	if len(names) == 0 {
		return
	}
	cells := g.Cells
	if widestOnly {
		wb, ws := 0, 0
		for _, c := range cells {
			wb, ws = max(wb, c.Branches), max(ws, c.Steps)
		}
		cells = slices.DeleteFunc(slices.Clone(cells), func(c *results.Cell) bool { return c.Branches != wb || c.Steps != ws })
	}
	titles := make([]string, len(names))
	for i, n := range names {
		titles[i] = metricTitle(n)
	}
	what := "vs baseline"
	if m.base == nil {
		what = ""
	}
	fmt.Fprintf(sb, "\n<details><summary>📈 %s distribution %s (%d cells)</summary>\n\n", strings.Join(titles, " / "), what, len(cells))
	for _, c := range cells {
		for _, name := range names {
			mt, ok := c.Metrics[name]
			if !ok || mt.Count == 0 {
				continue
			}
			head := samples(mt)
			var base []int64
			var bm results.Metric
			hasBase := false
			if b := m.base[cellKey(c)]; b != nil {
				if bm, hasBase = b.Metrics[name]; hasBase {
					base = samples(bm)
				}
			}
			fmt.Fprintf(sb, "**%s** — %s", m.lab.label(c), metricTitle(name))
			if hasBase {
				fmt.Fprintf(sb, ", baseline n=%d · this run n=%d", bm.Count, mt.Count)
			} else {
				fmt.Fprintf(sb, ", n=%d", mt.Count)
			}
			sb.WriteString("\n")
			if hasBase && strings.HasPrefix(name, "stso") {
				// The reference comment's cumulative line: the whole time
				// spent between steps, which a per-step median hides.
				bs, hs := sum(base), sum(head)
				fmt.Fprintf(sb, "Cumulative %s time: baseline %s → this run %s (Δ %s, %s)\n",
					metricTitle(name), fmtUS(bs), fmtUS(hs), signedMicros(float64(hs-bs)), strings.Trim(deltaText(float64(bs), float64(hs)), "()"))
			}
			sb.WriteString("\n```text\n")
			sb.WriteString(textHistogram(base, head, bm.Negative, mt.Negative, hasBase))
			sb.WriteString("```\n\n")
		}
	}
	sb.WriteString("</details>\n")
}

func sum(vs []int64) int64 {
	var s int64
	for _, v := range vs {
		s += v
	}
	return s
}

// previous writes the collapsed "Previous results" section: the newest n
// history entries with, per scenario, the geometric mean of the headline
// metric's p50 over the cells this run also has (so entries with different
// matrices stay comparable).
func (m *markdown) previous(sb *strings.Builder, n int) {
	n = min(n, len(m.history))
	type col struct {
		scenario, metric string
		keys             map[stats.CellKey]bool
	}
	var cols []col
	for _, g := range m.groups {
		h := headlineMetric(g.Cells)
		if h == "" {
			continue
		}
		keys := map[stats.CellKey]bool{}
		for _, c := range g.Cells {
			keys[cellKey(c)] = true
		}
		cols = append(cols, col{g.Name, h, keys})
	}
	fmt.Fprintf(sb, "<details><summary>📜 Previous results (%d)</summary>\n\n", n)
	sb.WriteString("| commit | date | cells | stalls |")
	for _, c := range cols {
		fmt.Fprintf(sb, " %s %s p50 |", c.scenario, metricTitle(c.metric))
	}
	sb.WriteString("\n|---|---|--:|--:|" + strings.Repeat("--:|", len(cols)) + "\n")
	line := func(f *results.File, label string) {
		stalls := 0
		for _, c := range f.Cells {
			stalls += c.Stalls
		}
		cells := fmt.Sprint(len(f.Cells))
		if f.Partial {
			cells += " (partial)"
		}
		fmt.Fprintf(sb, "| %s | %s | %s | %d |", label, f.StartedAt.UTC().Format("Mon, 02 Jan 2006 15:04 UTC"), cells, stalls)
		for _, c := range cols {
			var p50s []float64
			for i := range f.Cells {
				fc := &f.Cells[i]
				if !c.keys[cellKey(fc)] {
					continue
				}
				if mt, ok := fc.Metrics[c.metric]; ok && mt.Count > 0 && mt.P50 > 0 {
					p50s = append(p50s, float64(mt.P50))
				}
			}
			if len(p50s) == 0 {
				sb.WriteString(" - |")
				continue
			}
			fmt.Fprintf(sb, " %s |", metrics.FormatMicros(stats.Geomean(p50s)))
		}
		sb.WriteString("\n")
	}
	line(m.f, "**this run** `"+shortCommit(m.f.GitCommit)+"`")
	for _, h := range m.history[:n] {
		line(h, "`"+shortCommit(h.GitCommit)+"`")
	}
	sb.WriteString("\nEach scenario column is the geometric mean of the headline metric's p50 over the cells this run also has.\n\n</details>\n\n")
}

// footer writes the collapsed metric definitions and methodology.
func (m *markdown) footer(sb *strings.Builder) {
	sb.WriteString("<details><summary>ℹ️ Metric definitions & methodology</summary>\n\n")
	// Quoted from the one table of definitions, for the metrics this
	// report shows.
	present := map[string]bool{}
	for _, c := range m.f.Cells {
		for name := range c.Metrics {
			present[name] = true
		}
		if c.DriverLag != nil && c.DriverLag.Count > 0 {
			present[driverLagRow] = true
		}
	}
	var informational []string
	for _, d := range metrics.Definitions {
		if present[d.Name] {
			tested := ""
			if st := d.Tested(); st != metrics.RunValue {
				tested = "; compared on the " + string(st) // the unit of a test is the run
			}
			judged := ""
			if d.Better == metrics.Informational {
				judged = "; informational, never marked better or worse: " + d.Why
				informational = append(informational, d.Short)
			}
			fmt.Fprintf(sb, "- **%s** (%s) — %s; one sample per %s%s%s.\n", d.Short, d.Title, d.Definition, d.Sample, tested, judged)
		}
	}
	sb.WriteString("\n")
	for _, c := range metrics.Conventions {
		fmt.Fprintf(sb, "- %s\n", c)
	}
	sb.WriteString("\n")
	sb.WriteString("All timestamps are taken engine-side; t0 is the run's scheduled start, so a backlog cannot hide itself. " +
		"Warm-up runs are discarded. " +
		fmt.Sprintf("Methodology version %d: results of another methodology are never compared.", m.f.Methodology))
	if m.f.VirtualTime {
		sb.WriteString(" This sweep ran in virtual time: figures are simulated, deterministic for the seed.")
	}
	sb.WriteString("\n\n")
	fmt.Fprintf(sb, "%s marks a percentile over its target (within target is left unmarked). "+
		"Δ%% compares each percentile with the baseline's matching cell; %s is more than %.0f%% slower, %s more than %.0f%% faster, ±0%% is under 0.5%%. "+
		"The best column shows the fastest sample without Δ or marks: one run's luck is not a change. "+
		"%s in the n column: the change is not statistically significant (Mann-Whitney U over runs — per-run values, or one aggregate per run for a metric with several samples per run — α = %.2f), and its marks are dropped.\n\n",
		markOver, markWorse, markThreshold, markBetter, markThreshold, markNoise, stats.Alpha)
	if len(informational) > 0 {
		fmt.Fprintf(sb, "%s: informational, their Δ%% carries no %s or %s (a slower engine can lower them).\n\n",
			strings.Join(informational, ", "), markWorse, markBetter)
	}
	if m.null != nil {
		sb.WriteString("The null Δ column is a second sweep of the baseline against the baseline (the median of the tested per-run statistic): " +
			"the change noise alone makes. A significant change no larger than it counts as noise: " + markNoise + ", no marks.\n\n")
	}
	if t := m.targetsLine(); t != "" {
		sb.WriteString(t + "\n\n")
	}
	if present[driverLagRow] {
		fmt.Fprintf(sb, "⚠ under a scenario's table: a cell whose driver lag p99 is over %.0f%% of its TTFS p50 (open pacing charges lag to the engine).\n\n", 100*DriverLagShare)
	}
	sb.WriteString("</details>\n")
}

// targetsLine lists the targets in force, e.g. "Targets (p75/p90/p99, ms) —
// TTFS 200/300/600 · SL 50/60/125".
func (m *markdown) targetsLine() string {
	all := map[string][3]float64{}
	for i := range m.f.Cells {
		for k, v := range m.opt.targetsFor(m.f, &m.f.Cells[i]) {
			all[k] = v
		}
	}
	if len(all) == 0 {
		return ""
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(planIndex(metricOrder, a), planIndex(metricOrder, b)), cmp.Compare(a, b))
	})
	var parts []string
	for _, k := range names {
		t := all[k]
		parts = append(parts, fmt.Sprintf("%s %g/%g/%g", metricTitle(k), t[0], t[1], t[2]))
	}
	return "Targets (p75/p90/p99, ms) — " + strings.Join(parts, " · ")
}
