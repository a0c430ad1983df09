package reporters

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durabench/durabench/metrics"
)

// waterfallWidth is how many characters a waterfall's time axis spans.
const waterfallWidth = 48

// Waterfall draws one run's critical path in the terminal: a line per
// segment of the path in time order — its offset from the run's scheduled
// start, its length, its category, the span it came from (and its step)
// and a bar on the run's time axis — then the run's time per category,
// largest first. The segments add up to the run's TTLS exactly
// (metrics.RunPath), and so do the bars' lengths, to within a character.
// A run without a kept path (no spans recorded, or unfinished) says why.
// A run recorded done well after its last step (its TTC at least
// tailShare above its TTLS), whose spans the timelines kept, gets its path
// to completion drawn the same way after a blank line
// (metrics.RunCompletionPath).
func Waterfall(w io.Writer, cell string, tl *metrics.RunTimeline) error {
	ew := &errWriter{w: w}
	ttls, _ := metrics.TimeToLastStep(tl)
	fmt.Fprintf(ew, "run %s · %s", tl.ID, cell)
	switch {
	case !tl.Finished:
		fmt.Fprintf(ew, " · unfinished after %s: no critical path (it has no last step)\n", fmtDur(ttls))
		return ew.err
	case len(tl.Path) == 0:
		fmt.Fprintf(ew, " · TTLS %s: no critical path kept (a sweep with --spans off, a target that sends no spans, or a scenario without TTLS)\n", fmtDur(ttls))
		return ew.err
	}
	fmt.Fprintf(ew, " · TTLS %s, %d segments on its critical path\n", fmtDur(ttls), len(tl.Path))
	if err := drawPath(ew, tl.Path, tl.T0, ttls); err != nil {
		return err
	}
	ttc := metrics.TimeToCompletion(tl)
	if !longTail(float64(ttc), float64(ttls)) {
		return ew.err
	}
	segs, ok := metrics.RunCompletionPath(tl)
	if !ok || len(segs) == 0 {
		return ew.err
	}
	fmt.Fprintf(ew, "\n  path to completion · TTC %s (%s after the last step), %d segments\n", fmtDur(ttc), fmtDur(ttc-ttls), len(segs))
	if err := drawPath(ew, segs, tl.T0, ttc); err != nil {
		return err
	}
	return ew.err
}

// drawPath draws a path's segments on an axis from t0 to t0 + total, then
// its time per category.
func drawPath(ew *errWriter, path []metrics.PathSegment, t0, total time.Duration) error {
	segs := slices.Clone(path)
	slices.SortStableFunc(segs, func(a, b metrics.PathSegment) int { return cmp.Compare(a.Start, b.Start) })
	col := func(t time.Duration) int {
		if total <= 0 {
			return 0
		}
		return int(min(waterfallWidth, max(0, int64(t-t0)*waterfallWidth/int64(total))))
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  at\tlength\tcategory\tspan\t|0%s%s|\n", strings.Repeat(" ", waterfallWidth-1-len(fmtDur(total))), fmtDur(total))
	for _, s := range segs {
		what := s.Name
		if s.Step != "" {
			what += " " + s.Step
		}
		if what == "" {
			what = "-"
		}
		a, b := col(s.Start), col(s.End)
		if b == a && b < waterfallWidth {
			b++ // every segment shows, however short
		} else if b == a {
			a--
		}
		bar := strings.Repeat(" ", a) + strings.Repeat("█", b-a) + strings.Repeat(" ", waterfallWidth-b)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t|%s|\n", fmtDur(s.Start-t0), fmtDur(s.End-s.Start), s.Category, what, bar)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	totals := metrics.Totals(segs)
	order := make([]int, 0, len(totals))
	for i, d := range totals {
		if d > 0 {
			order = append(order, i)
		}
	}
	// Largest first; ties in report order (the sort is stable).
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(totals[b], totals[a]) })
	var parts []string
	for _, i := range order {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", metrics.Categories[i].Name, fmtDur(totals[i]), share(float64(totals[i]), float64(total))))
	}
	fmt.Fprintf(ew, "  by category: %s\n", strings.Join(parts, " · "))
	return ew.err
}

func fmtDur(d time.Duration) string { return metrics.FormatMicros(float64(d) / 1e3) }
