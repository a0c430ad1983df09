package engine

import (
	"context"
	"strconv"
	"sync"
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

// lockedSpans keeps every report, from any goroutine.
type lockedSpans struct {
	nopObserver
	mu      sync.Mutex
	reports [][]Span
}

func (k *lockedSpans) Spans(_ string, s []Span) {
	k.mu.Lock()
	k.reports = append(k.reports, s)
	k.mu.Unlock()
}

// TestCallSlots: the calls of a task's goroutines in their slots — some
// with an ID taken before the call, as a publish's — more calls than
// slots, the run finishing (a flush) while they are being made, and a
// call after the slots were released: every call is reported, once (a
// span reported again is the same span), with an ID of its own, and the
// task's own span ends with the last of them.
func TestCallSlots(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	obs := &lockedSpans{}
	r := newSpanRec(obs, w)
	for round := range 20 {
		run := "run-" + strconv.Itoa(round)
		ctx, task := r.begin(context.Background(), SpanTask, run)
		const goroutines, slots = 64, 48
		r.reserveCalls(ctx, slots)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, c := r.call(ctx)
				if g%2 == 0 {
					note := c.publishing("step/"+run+"/0."+strconv.Itoa(g), 0, g)
					c.published(note, "m", true)
				} else {
					c.done(0, opLoad, 0, g)
				}
			}()
			if g == goroutines/2 {
				r.finished(run)
			}
		}
		wg.Wait()
		if round%2 == 0 {
			r.releaseCalls(ctx)
			_, c := r.call(ctx) // after the slots: in the task's buffer
			c.done(0, opLoad, 1, 0)
		}
		task.end()
		seen := map[uint64]Span{}
		var self Span
		obs.mu.Lock()
		for _, rep := range obs.reports {
			for _, s := range rep {
				if s.Kind == SpanTask {
					self = s
					continue
				}
				if old, ok := seen[s.ID]; ok && old != s {
					t.Fatalf("span %d reported as %+v and as %+v", s.ID, old, s)
				}
				seen[s.ID] = s
			}
		}
		obs.reports = nil
		obs.mu.Unlock()
		want := goroutines
		if round%2 == 0 {
			want++
		}
		if len(seen) != want {
			t.Fatalf("round %d: %d calls reported, want %d", round, len(seen), want)
		}
		var last time.Duration
		for id, s := range seen {
			if s.Parent != task.self.ID || id == 0 || id == task.self.ID {
				t.Fatalf("span %+v: not a call of task %d", s, task.self.ID)
			}
			last = max(last, s.End)
		}
		if self.End != last {
			t.Errorf("round %d: the task ends at %v, its last call at %v", round, self.End, last)
		}
	}
}
