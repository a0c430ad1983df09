package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// FuzzRecordBatch: any record batch a driver receives decodes or is
// rejected; what decodes goes through the driver's session into a
// recorder, and the runs' timelines become metrics, without a panic.
func FuzzRecordBatch(f *testing.F) {
	b := appendBatchHeader(nil, "w-1", 1, 42*time.Millisecond)
	b = appendStep(b, "run-a", engine.StepSpan{Stage: 0, Index: 3, Seq: 3, Start: time.Millisecond, End: 2 * time.Millisecond, Attempt: 1})
	b = appendHook(b, "run-a", "tok", 3*time.Millisecond)
	b = appendChunk(b, "run-a", engine.ChunkSpan{Stage: 1, Index: 0, Written: time.Millisecond, Read: 4 * time.Millisecond})
	b = appendFinished(b, "run-a", 9*time.Millisecond, false)
	b = appendSpans(b, "run-a", []engine.Span{{Kind: engine.SpanCall, Op: engine.OpOf(world.OpPublish), Start: time.Millisecond, End: 3 * time.Millisecond, Stage: -1, Index: -1, ID: 2, Parent: 1}})
	f.Add(b)
	f.Add(appendBatchHeader(nil, "w-1", 2, time.Second))
	f.Add(appendStep(appendBatchHeader(nil, "w-1", 1, 0), "run-a", engine.StepSpan{Stage: -1, Index: 1 << 40, Attempt: -2}))
	f.Add([]byte{batchVersion, 0xff})
	rt := mem.New(world.Options{}).Runtime()
	f.Fuzz(func(t *testing.T, b []byte) {
		id, _, _, recs, err := decodeBatch(b)
		if err != nil {
			return
		}
		again := appendBatchHeader(nil, id, 0, 0)
		for _, r := range recs {
			switch r.kind {
			case recStep:
				again = appendStep(again, r.run, r.step)
			case recHook:
				again = appendHook(again, r.run, r.token, r.at)
			case recChunk:
				again = appendChunk(again, r.run, r.chunk)
			case recFinished:
				again = appendFinished(again, r.run, r.at, r.failed)
			case recSpans:
				again = appendSpans(again, r.run, r.spans)
			}
		}
		if _, _, _, recs2, err := decodeBatch(again); err != nil || len(recs2) != len(recs) {
			t.Fatalf("re-encoded batch: %d records, %v (had %d)", len(recs2), err, len(recs))
		}
		rec := metrics.NewRecorder()
		_ = rec.Begin("run-a", 0, 4, func() {})
		s := &Session{d: &Coordinator{cfg: CoordinatorConfig{Silence: time.Hour}}, rt: rt, obs: rec,
			workers: map[string]*workerState{id: {hasWM: true}, "other": {}}}
		s.onBatch(&nats.Msg{Data: b})
		tl, _ := rec.Snapshot("run-a", time.Second)
		_ = metrics.Collect([]metrics.RunTimeline{tl}, metrics.Config{ChunkInterval: time.Millisecond})
		if s.bad != 0 {
			t.Fatalf("a batch that decodes was counted bad")
		}
	})
}

// FuzzCellSpec: any cell announcement a worker receives decodes into one
// it may run — its cell under its sweep, its driver subject its cell's —
// or is refused.
func FuzzCellSpec(f *testing.F) {
	f.Add([]byte(`{"sweep":"durabench_aaaa1111_","prefix":"durabench_aaaa1111_c1","driver":"durabench.cluster.d.durabench_aaaa1111_c1","features":{},"options":{},"seed":1}`))
	f.Add([]byte(`{"sweep":"","prefix":"x","driver":""}`))
	f.Add([]byte(`{"sweep":"a","prefix":"a.>","driver":"durabench.cluster.d.a.>"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := decodeCellSpec(DefaultSubject, b)
		if err != nil {
			return
		}
		if !bytes.HasPrefix([]byte(spec.Prefix), []byte(spec.Sweep)) || spec.Driver != subjDriver(DefaultSubject, spec.Prefix) ||
			!prefixRE.MatchString(spec.Prefix) {
			t.Fatalf("accepted %+v", spec)
		}
	})
}

// FuzzShift: a clock shift request decodes or is rejected.
func FuzzShift(f *testing.F) {
	f.Add(encodeShift("durabench_aaaa1111_c1", -3*time.Millisecond))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		prefix, off, ok := decodeShift(b)
		if !ok {
			return
		}
		p2, off2, ok2 := decodeShift(encodeShift(prefix, off))
		if !ok2 || p2 != prefix || off2 != off {
			t.Fatalf("round trip %q %v -> %q %v", prefix, off, p2, off2)
		}
	})
}
