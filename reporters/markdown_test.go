package reporters

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reporters -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./reporters -run %s -update to accept):\n%s",
			name, t.Name(), firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\nwant: %s\ngot:  %s", i+1, w, g)
		}
	}
	return "(same lines)"
}

func render(t *testing.T, f *results.File, opt Options) string {
	t.Helper()
	opt.Now = fixedNow
	var buf bytes.Buffer
	if err := Markdown(&buf, f, opt); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestMarkdownGolden(t *testing.T) {
	cases := []struct {
		name string
		file *results.File
		opt  Options
	}{
		{"report.md", fixtureHead(), Options{}},
		{"report-baseline-history.md", fixtureHead(), Options{Baseline: fixtureBase(), History: fixtureHistory()}},
		{"report-partial-virtual-cloud.md", variant("cloud", true, true), Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, []byte(render(t, tc.file, tc.opt)))
		})
	}
	// The GitHub comment, without its embedded copy (gzip output may
	// change between Go releases; the round-trip test covers it).
	t.Run("report-github.md", func(t *testing.T) {
		body := render(t, fixtureHead(), Options{GitHub: true, Baseline: fixtureBase(), History: fixtureHistory()})
		i := strings.Index(body, "\n"+embedPrefix)
		if i < 0 {
			t.Fatal("no embedded results")
		}
		golden(t, "report-github.md", []byte(body[:i]+"\n"))
	})
}

func TestMarkdownContent(t *testing.T) {
	head, base := fixtureHead(), fixtureBase()
	md := render(t, head, Options{Baseline: base, History: fixtureHistory()})
	for _, want := range []string{
		"## 📊 Durable Workflow Benchmarks",
		"| metric | cell | best | p50 | p75 | p90 | p99 | n |",
		"### fanout", "### sequential",
		"`fanout-256-resilient-r04` (TTLS 306.2s)", // stalled run id with its TTLS
		"`fanout-64-baseline-r07`: step s12: claim rejected: step not found (412) after 3 attempts",
		"<details><summary>📈 TTLS distribution vs baseline",
		"<details><summary>📈 STSO inline / STSO queue-hop distribution vs baseline",
		"Cumulative STSO inline time: baseline",
		"<details><summary>📜 Previous results (3)</summary>",
		"<details><summary>ℹ️ Metric definitions & methodology</summary>",
		markWorse, markBetter,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// No GitHub-only parts in plain markdown.
	for _, not := range []string{Marker, embedPrefix} {
		if strings.Contains(md, not) {
			t.Errorf("plain markdown contains %q", not)
		}
	}
	// The definition of every metric shown is quoted from package metrics.
	for _, name := range []string{metrics.TTFS, metrics.TTLS, metrics.Skew, metrics.STSO, metrics.WO, metrics.TTC} {
		d, _ := metrics.Lookup(name)
		if !strings.Contains(md, "- **"+d.Short+"** ("+d.Title+") — "+d.Definition) {
			t.Errorf("footer lacks the definition of %s", d.Name)
		}
	}
	if !strings.Contains(md, metrics.Conventions[0]) {
		t.Error("footer lacks the conventions")
	}
}

func TestDeltaText(t *testing.T) {
	cases := []struct {
		base, cur  float64
		text, mark string
	}{
		{100, 100, "(±0%)", ""},
		{1000, 1004, "(±0%)", ""},
		{1000, 996, "(±0%)", ""},
		{100, 112, "(+12%)", ""},
		{100, 116, "(+16%)", markWorse},
		{100, 84, "(-16%)", markBetter},
		{100, 85, "(-15%)", ""},
		{0, 0, "(±0%)", ""},
		{0, 5, "(new)", ""},
	}
	for _, c := range cases {
		if got := deltaText(c.base, c.cur); got != c.text {
			t.Errorf("deltaText(%v, %v) = %q, want %q", c.base, c.cur, got, c.text)
		}
		if got := deltaMark(c.base, c.cur); got != c.mark {
			t.Errorf("deltaMark(%v, %v) = %q, want %q", c.base, c.cur, got, c.mark)
		}
	}
}

func TestTargets(t *testing.T) {
	f := variant("cloud", false, false)
	c := &f.Cells[0]
	if got := (Options{}).targetsFor(f, c)["ttfs"]; got != [3]float64{200, 300, 600} {
		t.Errorf("cloud default TTFS targets = %v", got)
	}
	f.Plan.Targets = map[string][3]float64{"ttfs": {1, 2, 3}}
	if got := (Options{}).targetsFor(f, c)["ttfs"]; got != [3]float64{1, 2, 3} {
		t.Errorf("plan targets not applied: %v", got)
	}
	opt := Options{Targets: map[string][3]float64{"ttfs": {0.5, 0.6, 0.7}}}
	if got := opt.targetsFor(f, c)["ttfs"]; got != [3]float64{0.5, 0.6, 0.7} {
		t.Errorf("option targets not applied: %v", got)
	}
	// TTFS in the fixture is ~1 ms: over a 0.5 ms p75 target, so marked.
	md := render(t, f, opt)
	overMark := regexp.MustCompile(markOver + ` \d`)
	if !overMark.MatchString(md) {
		t.Error("no over-target mark with a target every cell misses")
	}
	// Profile none has no default targets: nothing marked.
	none := fixtureHead()
	if md := render(t, none, Options{}); overMark.MatchString(md) {
		t.Error("over-target mark without any target")
	}
}

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]int64{0.3: 1, 1: 1, 1.5: 2, 3: 5, 7: 10, 11: 20, 240: 500, 1000: 1000, 1001: 2000} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %d, want %d", in, got, want)
		}
	}
}

func TestTextHistogram(t *testing.T) {
	head := []int64{1000, 1100, 1150, 1300, 1900, 2000, 2100, 306_000_000}
	base := []int64{900, 1000, 1200, 1250}
	h := textHistogram(base, head, 0, 2, true)
	lines := strings.Split(strings.TrimRight(h, "\n"), "\n")
	// header, <0 (skew), about 12 bins, one overflow bin for the stall.
	if n := len(lines); n < 8 || n > histBins+5 {
		t.Errorf("histogram has %d lines:\n%s", n, h)
	}
	if !strings.Contains(h, "<0 (skew)") || !strings.Contains(h, "≥") {
		t.Errorf("histogram lacks the negative or the overflow bin:\n%s", h)
	}
	var total int
	for _, l := range lines[1:] {
		var b, c int
		fields := strings.Fields(strings.NewReplacer("█", " ", "░", " ").Replace(l))
		if _, err := fmt.Sscan(fields[len(fields)-2]+" "+fields[len(fields)-1], &b, &c); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		total += b + c
	}
	if total != len(head)+len(base)+2 {
		t.Errorf("histogram counts %d samples, want %d:\n%s", total, len(head)+len(base)+2, h)
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 90 {
			t.Errorf("line too wide for a comment: %q", l)
		}
	}
}

func TestGitHubBudgetTrimsHistoryFirst(t *testing.T) {
	head := fixtureHead()
	// A long history: copies of one sweep under many commits (building each
	// from scratch would only slow the test).
	proto := fixtureHistory()[0]
	var history []*results.File
	for i := range 2000 {
		h := *proto
		h.GitCommit = fmt.Sprintf("%07x%033x", i+1, 0)
		h.StartedAt = fixtureStart.Add(-time.Duration(i+1) * time.Hour)
		history = append(history, &h)
	}
	body := render(t, head, Options{GitHub: true, Baseline: fixtureBase(), History: history})
	if len(body) >= CommentLimit {
		t.Fatalf("comment is %d bytes, limit %d", len(body), CommentLimit)
	}
	if !strings.HasPrefix(body, Marker+"\n") {
		t.Error("comment does not start with the sticky marker")
	}
	// History was trimmed, but only history: histograms and run ids stay.
	if strings.Contains(body, "<details><summary>📜 Previous results (2000)") {
		t.Error("history not trimmed")
	}
	if !strings.Contains(body, "📜 Previous results (") {
		t.Error("history dropped entirely although histograms could have gone first")
	}
	for _, keep := range []string{"📈 TTLS distribution", "`fanout-256-resilient-r04`"} {
		if !strings.Contains(body, keep) {
			t.Errorf("%q trimmed before history was exhausted", keep)
		}
	}
	if !strings.Contains(body, "Trimmed to fit GitHub's comment size limit: older previous results left out") {
		t.Error("trimming not announced")
	}
	// The newest entry is kept, the oldest dropped.
	if !strings.Contains(body, "`"+shortCommit(history[0].GitCommit)+"`") {
		t.Error("newest history entry trimmed")
	}
	if strings.Contains(body, "`"+shortCommit(history[len(history)-1].GitCommit)+"`") {
		t.Error("oldest history entry kept")
	}

	// Untrimmed, the same comment with a short history keeps everything.
	short := render(t, head, Options{GitHub: true, Baseline: fixtureBase(), History: history[:3]})
	if strings.Contains(short, "Trimmed to fit") || !strings.Contains(short, "📜 Previous results (3)") {
		t.Error("short comment trimmed")
	}
}

// widen repeats every cell of f under n version names, for wide sweeps.
func widen(f *results.File, n int) *results.File {
	var cells []results.Cell
	for i := range n {
		for _, c := range f.Cells {
			c.Version = fmt.Sprintf("%s-v%02d", c.Version, i)
			cells = append(cells, c)
		}
	}
	f.Cells = cells
	return f
}

func TestGitHubBudgetTrimsHistogramsThenRunDetail(t *testing.T) {
	// A sweep so wide that even without history the histograms must go,
	// but its tables still fit.
	f := widen(fixtureHead(), 6)
	body := render(t, f, Options{GitHub: true})
	if len(body) >= CommentLimit {
		t.Fatalf("comment is %d bytes, limit %d", len(body), CommentLimit)
	}
	if strings.Contains(body, "📈 ") {
		t.Error("histograms kept in an over-budget comment")
	}
	// Run ids are cheap and go last: they survive here.
	if !strings.Contains(body, "`fanout-256-resilient-r04` (TTLS 306.2s)") {
		t.Error("stalled run ids trimmed before the embedded histograms")
	}
	if _, err := ExtractEmbedded(body); err != nil {
		t.Errorf("embedded copy lost while trimming: %v", err)
	}
}

func TestGitHubBudgetTrimsRowsLast(t *testing.T) {
	// 440 cells: the tables alone are over the limit.
	f := widen(fixtureHead(), 40)
	cells := f.Cells
	body := render(t, f, Options{GitHub: true})
	if len(body) >= CommentLimit {
		t.Fatalf("comment is %d bytes, limit %d", len(body), CommentLimit)
	}
	if !strings.Contains(body, "more row(s) left out to fit the comment") {
		t.Error("row trimming not announced")
	}
	if got, err := ExtractEmbedded(body); err != nil || len(got.Cells) != len(cells) {
		t.Errorf("embedded copy: %v", err)
	}
}

func TestExtractEmbeddedRoundTrip(t *testing.T) {
	head := fixtureHead()
	body := render(t, head, Options{GitHub: true, Baseline: fixtureBase()})
	got, err := ExtractEmbedded(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.GitCommit != head.GitCommit || len(got.Cells) != len(head.Cells) || !got.StartedAt.Equal(head.StartedAt) {
		t.Fatalf("round trip lost the file: commit %q cells %d", got.GitCommit, len(got.Cells))
	}
	for i, c := range got.Cells {
		want := head.Cells[i]
		if cellKey(&c) != cellKey(&want) || c.Stalls != want.Stalls || len(c.StalledRuns) != len(want.StalledRuns) {
			t.Errorf("cell %d: %s differs", i, cellKey(&c))
		}
		for name, m := range c.Metrics {
			w := want.Metrics[name]
			if m.P50 != w.P50 || m.P99 != w.P99 || m.Count != w.Count {
				t.Errorf("cell %d %s: summary differs", i, name)
			}
			// Histograms travel for the metrics the report draws them of.
			drawn := name == "ttls" || name == "stso_inline" || name == "stso_queue"
			if drawn && m.HDR != w.HDR || !drawn && m.HDR != "" {
				t.Errorf("cell %d %s: embedded HDR %d bytes (drawn: %v)", i, name, len(m.HDR), drawn)
			}
			if len(m.Values) != 0 {
				t.Errorf("cell %d %s: per-run values embedded", i, name)
			}
		}
	}
	if len(head.Cells[0].Metrics["ttls"].Values) == 0 {
		t.Error("rendering stripped the caller's per-run values")
	}

	// The copy serves as the next comparison's baseline: deltas appear, and
	// the histograms come from the embedded HDR.
	next := render(t, head, Options{Baseline: got})
	if !strings.Contains(next, "(±0%)") || !strings.Contains(next, "baseline n=10") {
		t.Error("embedded copy does not work as a baseline")
	}

	if _, err := ExtractEmbedded("just a comment"); !errors.Is(err, ErrNoEmbedded) {
		t.Errorf("no embed: err = %v, want ErrNoEmbedded", err)
	}
	broken := strings.Replace(body, embedPrefix, embedPrefix+"!!", 1)
	if _, err := ExtractEmbedded(broken); err == nil || errors.Is(err, ErrNoEmbedded) {
		t.Errorf("corrupt embed: err = %v", err)
	}
}

func TestPartialIsLoud(t *testing.T) {
	f := variant("", true, false)
	md := render(t, f, Options{})
	if !strings.Contains(strings.SplitN(md, "\n", 2)[0], "PARTIAL") {
		t.Error("title does not say partial")
	}
	if !strings.Contains(md, "interrupted: context canceled") {
		t.Error("the sweep's error is not shown")
	}
	var buf bytes.Buffer
	if err := Text(&buf, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "PARTIAL RESULTS") {
		t.Errorf("text report does not open with PARTIAL RESULTS:\n%s", buf.String())
	}
}

func TestCellsOnlyInBaselineListed(t *testing.T) {
	head := fixtureHead()
	head.Cells = head.Cells[1:] // fanout 20 br · baseline no longer runs
	md := render(t, head, Options{Baseline: fixtureBase()})
	if !strings.Contains(md, "Cells in the baseline but not in this run: `fanout · 20 br · baseline`.") {
		t.Error("a cell missing from the head is not listed")
	}
}

func TestMethodologyMismatchNotCompared(t *testing.T) {
	base := fixtureBase()
	base.Methodology = results.Methodology + 1
	md := render(t, fixtureHead(), Options{Baseline: base})
	if strings.Contains(md, "%)") {
		t.Error("deltas shown against a baseline of another methodology")
	}
	if !strings.Contains(md, "they are not compared") {
		t.Error("methodology mismatch not explained")
	}
}

// TestBaselineWarnings: a baseline that differs in more than the change
// under test (reps, faults) is said at the top of the markdown and GitHub
// reports, before any table; the best column carries no change.
func TestBaselineWarnings(t *testing.T) {
	base, head := fixtureBase(), fixtureHead()
	base.Plan.Reps, head.Plan.Reps = 10, 30
	head.Plan.Options = map[string]string{"faults": "default.latency=lognormal:30ms:90ms"}
	for _, github := range []bool{false, true} {
		out := render(t, head, Options{Baseline: base, GitHub: github})
		warn := strings.Index(out, "> ⚠️ **Read the changes with care:**")
		table := strings.Index(out, "| metric | cell | best |")
		if warn < 0 || table < 0 || warn > table {
			t.Fatalf("github=%v: warnings at %d, first table at %d:\n%s", github, warn, table, out[:min(len(out), 2000)])
		}
		for _, want := range []string{"> - reps differs: base 10, head 30", `> - faults differs: base (none), head default.latency=lognormal:30ms:90ms`} {
			if !strings.Contains(out, want) {
				t.Errorf("github=%v: report lacks %q", github, want)
			}
		}
	}
}

// TestNullColumn: with a null sweep the table has a null Δ column and the
// footer says what it is.
func TestNullColumn(t *testing.T) {
	out := render(t, fixtureHead(), Options{Baseline: fixtureBase(), Null: fixtureBase()})
	for _, want := range []string{"| p99 | null Δ | n |", "The null Δ column is a second sweep of the baseline", " | +0% | 10"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if out := render(t, fixtureHead(), Options{Baseline: fixtureBase()}); strings.Contains(out, "null Δ") {
		t.Error("a null column without a null sweep")
	}
}

// TestFastShare: a head whose TTFS runs all left the fast mode (10 of 10
// fast in the baseline, 0 of 10 now, every run 3 × slower than before)
// gets a fast-mode row marked worse in the comment; a cell whose share did
// not move gets no row.
func TestFastShare(t *testing.T) {
	base, head := fixtureBase(), fixtureHead()
	c := &head.Cells[0]
	bm := base.Cells[0].Metrics["ttfs"]
	slow := make([]int64, len(bm.Values))
	for i, v := range bm.Values {
		slow[i] = 3 * v
	}
	c.Metrics["ttfs"] = perRunOf("ttfs", slow, len(slow))
	got := render(t, head, Options{GitHub: true, Baseline: base})
	row := "| " + newLabeler(head).label(c) + " | "
	i := strings.Index(got, "**TTFS fast mode**")
	if i < 0 {
		t.Fatalf("no TTFS fast-mode table:\n%s", got)
	}
	table := got[i:]
	table = table[:strings.Index(table, "\n\n⚠️")]
	if !strings.Contains(table, row) || !strings.Contains(table, "| 0/10 (0%) | -100 pp 🔺 |") {
		t.Errorf("the cell that left the fast mode is not marked worse:\n%s", table)
	}
	if strings.Contains(table, "| 64 br · baseline | ") { // 10/10 on both sides
		t.Errorf("a cell whose share did not move has a row:\n%s", table)
	}
}

// A target cell whose span events durabench could not place says so, with
// the count and the first one's reason.
func TestDroppedSpansFlagged(t *testing.T) {
	f := fixtureHead()
	c := &f.Cells[0]
	c.Target, c.Engine, c.DroppedSpans = "eng", "eng", 12
	c.DroppedSpan = `span "publish" of seq 69: category "gc_pause" is not one of durabench's critical-path categories`
	md := render(t, f, Options{})
	if !strings.Contains(md, "**Spans left out** in `") || !strings.Contains(md, "12 span events") || !strings.Contains(md, "gc_pause") {
		t.Errorf("no line about the 12 spans left out:\n%s", md)
	}
	c.DroppedSpans, c.DroppedSpan = 0, ""
	if md := render(t, f, Options{}); strings.Contains(md, "Spans left out") {
		t.Error("spans left out flagged with none dropped")
	}
}
