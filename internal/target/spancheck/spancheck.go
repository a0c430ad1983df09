// Package spancheck is the adapters' test helper for protocol 1.2 span
// events: the rules `durabench target check` applies to one run's spans,
// and the critical path durabench walks on them. Each adapter module's
// tests run their own engine and check its runs with it.
package spancheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

// Check asserts what protocol 1.2 asks of a run's span events (the
// rules `durabench target check` applies): a known category other than
// driver_lag, end >= at, wait within the span, unique ids, parent and after
// naming spans of the run, every span before the terminal event and
// inside [from, the terminal event]; and that every completed step has its
// body span, exactly the step's times, inside a span named task.
func Check(t testing.TB, run string, evs []protocol.Event, from int64, task string) {
	t.Helper()
	ids := map[int64]protocol.Event{}
	terminal := -1
	for i, ev := range evs {
		if ev.Terminal() {
			terminal = i
		}
		if ev.Kind != protocol.EventSpan {
			continue
		}
		if terminal >= 0 {
			t.Errorf("%s: span %d after the terminal event", run, ev.SpanID)
		}
		if _, ok := metrics.CategoryIndex(ev.Category); !ok || ev.Category == metrics.CatDriverLag {
			t.Errorf("%s: span %d category %q", run, ev.SpanID, ev.Category)
		}
		if ev.End < ev.At || ev.Wait < 0 || ev.Wait > ev.End-ev.At {
			t.Errorf("%s: span %d [%d, %d] wait %d", run, ev.SpanID, ev.At, ev.End, ev.Wait)
		}
		if ev.SpanID < 1 {
			t.Errorf("%s: span without id: %+v", run, ev)
		}
		if _, dup := ids[ev.SpanID]; dup {
			t.Errorf("%s: span id %d twice", run, ev.SpanID)
		}
		ids[ev.SpanID] = ev
	}
	if terminal < 0 {
		t.Fatalf("%s: no terminal event", run)
	}
	end := evs[terminal].At
	for _, sp := range ids {
		for _, ref := range []int64{sp.Parent, sp.After} {
			if _, ok := ids[ref]; ref != 0 && !ok {
				t.Errorf("%s: span %d refers to %d, not a span of the run", run, sp.SpanID, ref)
			}
		}
		if sp.At < from || sp.End > end {
			t.Errorf("%s: span %d %s [%d, %d] outside the run [%d, %d]", run, sp.SpanID, sp.Name, sp.At, sp.End, from, end)
		}
	}
	started := map[[2]int]int64{}
	for _, ev := range evs {
		switch ev.Kind {
		case protocol.EventStepStarted:
			started[[2]int{ev.Stage, ev.Index}] = ev.At
		case protocol.EventStepCompleted:
			found := false
			for _, sp := range ids {
				if sp.Category == metrics.CatBody && sp.Stage == ev.Stage && sp.Index == ev.Index {
					found = sp.At == started[[2]int{ev.Stage, ev.Index}] && sp.End == ev.At &&
						ids[sp.Parent].Name == task
				}
			}
			if !found {
				t.Errorf("%s: step %d/%d has no body span at its times inside a %s span", run, ev.Stage, ev.Index, task)
			}
		}
	}
}

// pathOf walks a run's critical path the way durabench does for a 1.2

// Path walks a run's critical path the way durabench does for a 1.2
// target (metrics.CriticalPath on the run's spans): from the task that
// ran the last step, back to t0. It returns the path, the run's TTLS and
// the task the walk started from.
func Path(evs []protocol.Event, t0 int64) (segs []metrics.PathSegment, ttls time.Duration, from uint64) {
	var spans []metrics.Span
	type iv struct{ s, e int64 }
	steps := map[[2]int]*iv{}
	for _, ev := range evs {
		switch ev.Kind {
		case protocol.EventSpan:
			spans = append(spans, metrics.Span{Category: ev.Category, Name: ev.Name, Start: time.Duration(ev.At), End: time.Duration(ev.End),
				Wait: time.Duration(ev.Wait), Stage: ev.Stage, Index: ev.Index, ID: uint64(ev.SpanID), Parent: uint64(ev.Parent), After: uint64(ev.After)})
		case protocol.EventStepStarted:
			steps[[2]int{ev.Stage, ev.Index}] = &iv{s: ev.At}
		case protocol.EventStepCompleted:
			if s := steps[[2]int{ev.Stage, ev.Index}]; s != nil {
				s.e = ev.At
			}
		}
	}
	var last [2]int
	var lastEnd int64
	for k, s := range steps {
		if s.e > lastEnd {
			last, lastEnd = k, s.e
		}
	}
	for _, sp := range spans {
		if sp.Category == metrics.CatBody && sp.Stage == last[0] && sp.Index == last[1] && int64(sp.Start) == steps[last].s {
			from = sp.Parent
		}
	}
	return metrics.CriticalPath(spans, time.Duration(t0), time.Duration(lastEnd), from), time.Duration(lastEnd - t0), from
}

// Shares are a path's categories as fractions of its length.
func Shares(segs []metrics.PathSegment, ttls time.Duration) map[string]float64 {
	out := map[string]float64{}
	for cat, d := range Totals(segs) {
		out[cat] = float64(d) / float64(ttls)
	}
	return out
}

// Totals are a path's time per category.
func Totals(segs []metrics.PathSegment) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range segs {
		out[s.Category] += s.End - s.Start
	}
	return out
}

// Cell is one scenario of an adapter's span test: its options, how many
// runs, and the most of their TTLS that may be unattributed on average.
type Cell struct {
	Scenario string
	Opts     map[string]string
	Runs     int
	Bound    float64
}

// RunShares is one run of a Cell: its path's categories as fractions of
// its TTLS (Shares).
type RunShares struct {
	Scenario, Run string
	Shares        map[string]float64
}

// Cells runs each cell's runs — run starts one with spans asked for and
// returns its events to the end; at reads the engine's clock, as the
// run's start is sent — and for each checks its spans (Check, step
// bodies inside a span named task), walks its critical path and logs its
// shares (with -v, the path's segments too when over 3% of it is
// unattributed). A cell whose runs' mean unattributed share is over its
// bound fails. It returns each run's shares, for the adapter's own
// checks.
func Cells(t testing.TB, cells []Cell, task string, at func() int64,
	run func(id, scenario string, opts map[string]string) []protocol.Event) []RunShares {
	t.Helper()
	var out []RunShares
	for _, cell := range cells {
		var unatt float64
		for i := range cell.Runs {
			id := fmt.Sprintf("spans-%s-%d", cell.Scenario, i)
			sent := at()
			evs := run(id, cell.Scenario, cell.Opts)
			Check(t, id, evs, sent, task)
			segs, ttls, from := Path(evs, sent)
			if from == 0 {
				t.Errorf("%s: the last step's body span names no task", id)
			}
			sh := Shares(segs, ttls)
			out = append(out, RunShares{Scenario: cell.Scenario, Run: id, Shares: sh})
			unatt += sh[metrics.CatUnattributed]
			var line []string
			for _, cd := range metrics.Categories {
				if v := sh[cd.Name]; v > 0 {
					line = append(line, fmt.Sprintf("%s %.0f%%", cd.Name, 100*v))
				}
			}
			t.Logf("%s: TTLS %v: %s", id, ttls.Round(10*time.Microsecond), strings.Join(line, ", "))
			if sh[metrics.CatUnattributed] > 0.03 && testing.Verbose() {
				for _, sg := range segs {
					t.Logf("  %-12s %.3f–%.3f ms %s %s", sg.Category, float64(sg.Start-time.Duration(sent))/1e6,
						float64(sg.End-time.Duration(sent))/1e6, sg.Name, sg.Step)
				}
			}
		}
		if mean := unatt / float64(cell.Runs); mean > cell.Bound {
			t.Errorf("%s: unattributed %.1f%% of TTLS on average, want under %.0f%%", cell.Scenario, 100*mean, 100*cell.Bound)
		}
	}
	return out
}
