package reporters

import (
	"fmt"
	"strings"
	"time"

	"github.com/durabench/durabench/results"
)

// cutWarnings says, for each cell the cell timeout ended with runs still
// to measure, how many it cut and what that does to the cell's figures:
// those runs are counted as stalls, so a cell of a slow engine on too
// short a budget reads "stalls 8 of 10" — and without a word on why, a
// user takes that for the engine's stall rate. The runs that never
// started have no latency; an unfinished run's is its elapsed time at
// the cut (a lower bound). The fix is the flag.
func cutWarnings(f *results.File, cells []*results.Cell, lab labeler) []string {
	var out []string
	for _, c := range cells {
		unfinished, unstarted := cutRuns(c)
		if unfinished+unstarted == 0 {
			continue
		}
		budget := "the cell timeout"
		if ms := f.Plan.CellTimeoutMS; ms > 0 {
			budget += " (" + (time.Duration(ms) * time.Millisecond).String() + ")"
		}
		var parts []string
		if unfinished > 0 {
			parts = append(parts, fmt.Sprintf("%d unfinished (TTLS: the elapsed time at the cut, a lower bound)", unfinished))
		}
		if unstarted > 0 {
			parts = append(parts, fmt.Sprintf("%d never started (the figures are over the %d that did)", unstarted, c.Runs-unstarted))
		}
		out = append(out, fmt.Sprintf("%s: %s cut %d of %d runs, counted as stalls: %s; raise --cell-timeout to measure them",
			lab.label(c), budget, unfinished+unstarted, c.Runs, strings.Join(parts, ", ")))
	}
	return out
}

// cutRuns counts the cell's runs the cell timeout cut: started but
// unfinished, and never started.
func cutRuns(c *results.Cell) (unfinished, unstarted int) {
	for _, r := range c.StalledRuns {
		switch {
		case r.NotStarted:
			unstarted++
		case !r.Finished:
			unfinished++
		}
	}
	return unfinished, unstarted
}
