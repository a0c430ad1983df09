package engine_test

import (
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
)

// TestQueueSpansFollowTheirPublish: every step's delivery, in a wide
// fan-out whose 256 publishes run at once, has a queue span after the
// publish of its own message, from that publish's return (or empty, when
// the delivery came first) to the delivery. The notes that link them are
// taken and read without a lock: a lost or crossed note shows here.
func TestQueueSpansFollowTheirPublish(t *testing.T) {
	side := newSpansSide(t, true) // resilient-inband on mem, as BenchmarkSpansMem256
	for _, run := range []string{"a", "b"} {
		tl := side.finish(t, run, engine.FanOut(256))
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
	}
}
