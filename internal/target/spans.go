package target

import (
	"fmt"
	"time"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
)

// Span events (protocol 1.2): a target's intervals of engine-side work on
// a run, each with a critical-path category. A session turns each into a
// metrics.Span of the run's timeline (SpanOf) so that the critical path is
// walked on a target's runs as on the built-in engine's.

// SpanCategory reports why category cannot be a span event's: it must be
// one of metrics.Categories, and not driver_lag (the driver's own).
func SpanCategory(category string) error {
	switch _, known := metrics.CategoryIndex(category); {
	case category == "":
		return fmt.Errorf("no category")
	case !known:
		return fmt.Errorf("category %q is not one of durabench's critical-path categories", category)
	case category == metrics.CatDriverLag:
		return fmt.Errorf("category %s is the driver's own", category)
	}
	return nil
}

// CheckSpan reports what is wrong with span event ev on its own: its
// category (SpanCategory), an end before its start, a wait outside the
// span, ids below 1 (a span's own id, its parent, its after: 0 or left
// out is none). What concerns the run's other spans (unique ids, the
// spans a parent or after names) the checker asks of the whole run.
func CheckSpan(ev protocol.Event) error {
	if err := SpanCategory(ev.Category); err != nil {
		return err
	}
	if ev.End < ev.At {
		return fmt.Errorf("end %d before at %d (%s)", ev.End, ev.At, time.Duration(ev.At-ev.End))
	}
	if ev.Wait < 0 || ev.Wait > ev.End-ev.At {
		return fmt.Errorf("wait %s outside the span's %s", time.Duration(ev.Wait), time.Duration(ev.End-ev.At))
	}
	for _, id := range []struct {
		name string
		v    int64
	}{{"span", ev.SpanID}, {"parent", ev.Parent}, {"after", ev.After}} {
		if id.v < 0 {
			return fmt.Errorf("%s %d: ids are integers from 1", id.name, id.v)
		}
	}
	if ev.SpanID != 0 && (ev.Parent == ev.SpanID || ev.After == ev.SpanID) {
		return fmt.Errorf("span %d refers to itself", ev.SpanID)
	}
	return nil
}

// SpanOf converts span event ev to a span of its run's critical-path
// timeline: at and end converted by conv (the target's clock to the
// driver's, with the cell's clock offset), the target's ids mapped into
// the run's id space (metrics.TargetSpanID: never the driver's
// driver_lag span's, nor the built-in engine's), its wait clamped to the
// span. ok is false for a span durabench cannot place — a category it
// does not know (or driver_lag), an end before its start: the session
// leaves it out (its time shows as unattributed) and the checker fails it.
//
// A span's stage and index name its step; a span other than a body that
// leaves both out (0.0) is taken as about no step, for display.
func SpanOf(ev protocol.Event, conv func(at int64) time.Duration) (sp metrics.Span, ok bool) {
	if SpanCategory(ev.Category) != nil || ev.End < ev.At {
		return metrics.Span{}, false
	}
	sp = metrics.Span{Category: ev.Category, Name: ev.Name, Start: conv(ev.At), End: conv(ev.End),
		Wait: time.Duration(min(max(ev.Wait, 0), ev.End-ev.At)), Stage: ev.Stage, Index: ev.Index,
		ID: metrics.TargetSpanID(ev.SpanID), Parent: metrics.TargetSpanID(ev.Parent), After: metrics.TargetSpanID(ev.After)}
	if ev.Category != metrics.CatBody && ev.Stage == 0 && ev.Index == 0 {
		sp.Stage, sp.Index = -1, -1
	}
	if sp.Parent == sp.ID {
		sp.Parent = 0
	}
	if sp.After == sp.ID {
		sp.After = 0
	}
	return sp, true
}
