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
