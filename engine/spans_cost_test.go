package engine

import (
	"context"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

type nullSpans struct{ nopObserver }

func (nullSpans) Spans(string, []Span) {}

// BenchmarkSpanCall is what timing one world call costs: a call through
// the span recorder against the same call made directly.
func BenchmarkSpanCall(b *testing.B) {
	w := mem.New(world.Options{})
	defer w.Close()
	ctx := context.Background()
	_ = w.CreateRun(ctx, world.Run{ID: "r"})
	r := newSpanRec(nullSpans{}, w)
	sw := &spanWorld{World: w, r: r}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = w.GetRun(ctx, "r")
		}
	})
	b.Run("spans", func(b *testing.B) {
		tctx, task := r.begin(ctx, SpanTask, "r")
		for i := 0; i < b.N; i++ {
			_, _ = sw.GetRun(tctx, "r")
			if i%1000 == 999 {
				task.end()
				tctx, task = r.begin(ctx, SpanTask, "r")
			}
		}
		task.end()
	})
	b.Run("now", func(b *testing.B) {
		var s time.Duration
		for i := 0; i < b.N; i++ {
			s += r.rt.Now()
		}
		_ = s
	})
}

type keptSpans struct {
	nopObserver
	reports [][]Span
}

func (k *keptSpans) Spans(_ string, s []Span) {
	k.reports = append(k.reports, append([]Span(nil), s...))
}

// TestOpenTasks: a run's tasks in progress are flushed, in ID order, when
// it finishes — those that ended before are not — and a task named twice
// is listed once.
func TestOpenTasks(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	obs := &keptSpans{}
	r := newSpanRec(obs, w)
	ctx := context.Background()
	_, a := r.begin(ctx, SpanTask, "run")
	_, b := r.begin(ctx, SpanTask, "run")
	_, c := r.begin(ctx, SpanResume, "")
	c.setRun("run")
	c.setRun("run")
	b.end()
	if len(obs.reports) != 1 {
		t.Fatalf("%d reports after one task ended", len(obs.reports))
	}
	r.finished("run")
	if len(obs.reports) != 3 {
		t.Fatalf("%d reports after the run finished, want 3 (b, then a and c flushed)", len(obs.reports))
	}
	if got := []uint64{obs.reports[1][0].ID, obs.reports[2][0].ID}; got[0] != a.self.ID || got[1] != c.self.ID {
		t.Errorf("flushed %v, want a %d then c %d", got, a.self.ID, c.self.ID)
	}
	a.end()
	c.end()
	listed := 0
	for t := r.runOf("run").tasks.Load(); t != nil; t = t.inRun {
		listed++
	}
	if listed != 3 {
		t.Errorf("the run lists %d tasks, want 3 (c once)", listed)
	}
	n := len(obs.reports)
	r.finished("run")
	if len(obs.reports) != n {
		t.Error("ended tasks were flushed again")
	}
}
