package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// TestQueueSpansFollowTheirPublish: every step's delivery, in a wide
// fan-out whose 256 publishes run at once, has a queue span after the
// publish of its own message, from that publish's return (or empty, when
// the delivery came first) to the delivery. The notes that link them are
// taken and read without a lock: a lost or crossed note shows here.
func TestQueueSpansFollowTheirPublish(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	rec := metrics.NewRecorder()
	v, err := engine.LookupVersion("resilient-inband")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{World: w, Features: v.Features, Observer: rec, Concurrency: 64})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	for _, run := range []string{"a", "b"} {
		done := make(chan struct{})
		if err := rec.Begin(run, w.Runtime().Now(), 256, func() { close(done) }); err != nil {
			t.Fatal(err)
		}
		if err := eng.StartRun(ctx, run, engine.FanOut(256)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("run %s did not finish", run)
		}
		tl, _ := rec.Snapshot(run, w.Runtime().Now())
		byID := map[uint64]metrics.Span{}
		for _, s := range tl.AllSpans() {
			byID[s.ID] = s
		}
		queues, publishes := 0, 0
		for _, q := range byID {
			if q.Name == string(world.OpPublish) && q.Stage >= 0 {
				publishes++
			}
			if q.Category != metrics.CatQueueWait || q.Stage < 0 {
				continue
			}
			queues++
			p, ok := byID[q.After]
			if !ok || p.Name != string(world.OpPublish) {
				t.Fatalf("run %s: step %d.%d's queue span follows %+v, not a publish", run, q.Stage, q.Index, p)
			}
			if p.Stage != q.Stage || p.Index != q.Index {
				t.Errorf("run %s: step %d.%d's queue span follows the publish of step %d.%d", run, q.Stage, q.Index, p.Stage, p.Index)
			}
			if q.Start != p.End && q.Start != q.End {
				t.Errorf("run %s: step %d.%d waited from %v, its publish returned at %v", run, q.Stage, q.Index, q.Start, p.End)
			}
		}
		// A step run inline has no message (the version's inline budget).
		if queues != publishes || queues < 250 {
			t.Errorf("run %s: %d steps' queue spans for %d publishes of a step", run, queues, publishes)
		}
		rec.Forget(run)
	}
}
