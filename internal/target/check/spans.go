package check

import (
	"fmt"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

// Span events (protocol 1.2): each run's are checked on the row "span
// events", and its critical path, walked on them as a sweep walks it, is
// summed up on the informational row "spans attribute".

// spanName names span event ev in a reason: its category and its name.
func spanName(ev protocol.Event) string {
	if ev.Name == "" {
		return ev.Category
	}
	return fmt.Sprintf("%s %q", ev.Category, ev.Name)
}

// spanWindow checks that span event ev of run, read by the poll that
// returned at last, lies inside the run's request window, as every other
// timestamp must (checkWindow).
func (k *checker) spanWindow(run string, ev protocol.Event, sent, last time.Duration, f *findings) {
	at, end := k.clk.ToDriver(time.Duration(ev.At)), k.clk.ToDriver(time.Duration(ev.End))
	if min(at, end) < sent-k.bound || max(at, end) > last+k.bound {
		f.failf(checkSpans, "%s: span event seq %d (%s) [%s, %s], outside [%s, %s] (clock error bound %s)", run, ev.Seq, spanName(ev),
			at.Round(time.Microsecond), end.Round(time.Microsecond), sent.Round(time.Microsecond), last.Round(time.Microsecond), k.bound)
	}
}

// spans checks run's span events against each other and against its
// terminal event (tl is its terminal answer, events its whole timeline),
// and walks the critical path of a run whose spans are sound.
func (k *checker) spans(run string, tl protocol.Timeline, events []protocol.Event, sent time.Duration, f *findings) {
	var spans []protocol.Event
	var terminal int64 // the terminal event's seq (0: none)
	for _, ev := range events {
		switch {
		case ev.Kind == protocol.EventSpan:
			spans = append(spans, ev)
		case ev.Terminal() && terminal == 0:
			terminal = ev.Seq
		}
	}
	if len(spans) == 0 {
		return
	}
	f.passed(checkSpans)
	if k.info.Minor < protocol.MinorSpans {
		f.failf(checkSpans, "%s: %d span events from a target that declares protocol %s: a target that sends spans declares "+
			`"minor": %d (1.2) in GET /v1/info`, run, len(spans), k.info.ProtocolString(), protocol.MinorSpans)
	}
	broken := false
	fail := func(format string, a ...any) {
		broken = true
		f.failf(checkSpans, run+": "+format, a...)
	}
	ids := map[int64]int64{} // a span's id -> its seq
	for _, sp := range spans {
		if err := target.CheckSpan(sp); err != nil {
			fail("span event seq %d (%s): %v", sp.Seq, spanName(sp), err)
		}
		if sp.SpanID > 0 {
			if seq, dup := ids[sp.SpanID]; dup {
				fail("span id %d on seq %d and seq %d: a span's id is unique among its run's spans", sp.SpanID, seq, sp.Seq)
			}
			ids[sp.SpanID] = sp.Seq
		}
		if terminal != 0 && sp.Seq > terminal {
			fail("span event seq %d (%s) after the terminal event (seq %d): send every span before it", sp.Seq, spanName(sp), terminal)
		}
	}
	for _, sp := range spans {
		for _, ref := range []struct {
			field string
			id    int64
		}{{"parent", sp.Parent}, {"after", sp.After}} {
			if _, ok := ids[ref.id]; ref.id > 0 && !ok {
				fail("span event seq %d (%s): %s %d names no span of the run (a referenced span is sent before the terminal event)",
					sp.Seq, spanName(sp), ref.field, ref.id)
			}
		}
	}
	if broken || tl.Status != protocol.StatusCompleted {
		return
	}
	// The run's critical path, as a sweep walks it: from the start
	// request's send (its t0; the checker has no driver lag) to its last
	// step end, on the target's spans converted to the checker's clock.
	conv := func(at int64) time.Duration { return k.clk.ToDriver(time.Duration(at)) }
	rt := metrics.RunTimeline{ID: run, T0: sent, Finished: true}
	type step struct{ stage, index, attempt int }
	starts := map[step]int64{}
	for _, ev := range events {
		switch ev.Kind {
		case protocol.EventStepStarted:
			starts[step{ev.Stage, ev.Index, ev.Attempt}] = ev.At
		case protocol.EventStepCompleted:
			start, ok := starts[step{ev.Stage, ev.Index, ev.Attempt}]
			if !ok {
				start = ev.At
			}
			rt.Steps = append(rt.Steps, engine.StepSpan{Stage: ev.Stage, Index: ev.Index, Start: conv(start), End: conv(ev.At),
				Attempt: max(ev.Attempt, 1), Inline: ev.Inline})
		case protocol.EventSpan:
			if sp, ok := target.SpanOf(ev, conv); ok {
				rt.Spans = append(rt.Spans, sp)
			}
		case protocol.EventRunCompleted:
			rt.Done = conv(ev.At)
		}
	}
	segs, ok := metrics.RunPath(&rt)
	ttls, _ := metrics.TimeToLastStep(&rt)
	if !ok || ttls <= 0 {
		return
	}
	un, _ := metrics.CategoryIndex(metrics.CatUnattributed)
	f.unattributed = append(f.unattributed, float64(metrics.Totals(segs)[un])/float64(ttls))
}

// attribution fills the scenario's "spans attribute" row: the mean share
// of TTLS its runs' critical paths left unattributed (informational), or
// why it was not walked. The time a run waited for the checker to resume
// its hooks (it holds a long poll first) is on no span: with hooks, the
// row says so.
func attribution(f *findings, hooks int, hold time.Duration) {
	switch _, broken := f.fail[checkSpans]; {
	case broken:
		f.na[checkAttribute] = "not walked: the spans fail span events"
		return
	case len(f.unattributed) == 0:
		if f.ran[checkSpans] {
			f.na[checkAttribute] = "no run's critical path could be walked (no completed run with a step)"
		}
		return
	}
	var sum float64
	for _, u := range f.unattributed {
		sum += u
	}
	f.ran[checkAttribute] = true
	f.note[checkAttribute] = fmt.Sprintf("%.1f%% of TTLS unattributed (mean of %d runs)", 100*sum/float64(len(f.unattributed)),
		len(f.unattributed))
	if hooks > 0 {
		f.note[checkAttribute] += fmt.Sprintf(", the checker's %s hold before each hook's resume included", hold)
	}
}
