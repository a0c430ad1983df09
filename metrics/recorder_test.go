package metrics

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
)

func TestRecorderTimeline(t *testing.T) {
	r := NewRecorder()
	var done atomic.Int32
	if err := r.Begin("r1", dms(10), 2, func() { done.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := r.Begin("r1", 0, 0, nil); !errors.Is(err, ErrDuplicateRun) {
		t.Fatalf("second Begin: %v; want ErrDuplicateRun", err)
	}
	r.StepBody("r1", sp(0, 0, 0, 11, 12, true, 1))
	r.StepBody("r1", sp(0, 1, 1, 11, 13, false, 1))
	r.HookCreated("r1", "tok", dms(14))
	r.HookResumed("r1", "tok", dms(15))
	r.StreamChunk("r1", chunk(0, 16, 17))

	// An unknown run (another driver's warm-up) is ignored.
	r.StepBody("other", sp(0, 0, 0, 1, 2, false, 1))
	r.RunFinished("other", dms(3), false)

	mid, ok := r.Snapshot("r1", dms(50))
	if !ok || mid.Finished || mid.Cut != dms(50) {
		t.Fatalf("unfinished snapshot = %+v, %v", mid, ok)
	}
	r.RunFinished("r1", dms(20), false)
	r.RunFinished("r1", dms(99), true) // a second terminal report is ignored
	if done.Load() != 1 {
		t.Fatalf("done called %d times", done.Load())
	}
	tl, ok := r.Snapshot("r1", dms(60))
	if !ok {
		t.Fatal("Snapshot: unknown run")
	}
	if tl.ID != "r1" || tl.T0 != dms(10) || !tl.Finished || tl.Failed || tl.Done != dms(20) || tl.Cut != 0 {
		t.Errorf("timeline = %+v", tl)
	}
	if len(tl.Steps) != 2 || len(tl.Chunks) != 1 || len(tl.Hooks) != 1 {
		t.Fatalf("timeline = %+v", tl)
	}
	if h := tl.Hooks[0]; h != (HookSpan{Token: "tok", Created: dms(14), Resumed: dms(15), WasResumed: true}) {
		t.Errorf("hook = %+v", h)
	}
	// A snapshot is a copy: later appends do not reach it.
	r.StepBody("r1", sp(0, 0, 0, 30, 31, false, 2))
	if len(tl.Steps) != 2 || len(mid.Steps) != 2 {
		t.Error("snapshot aliases the recorder's slices")
	}
	if _, ok := r.Snapshot("other", 0); ok {
		t.Error("Snapshot of an unregistered run reported ok")
	}
	r.Forget("r1")
	if _, ok := r.Snapshot("r1", 0); ok || r.Len() != 0 {
		t.Error("Forget kept the run")
	}
	r.StepBody("r1", sp(0, 0, 0, 1, 2, false, 1)) // ignored, no panic
}

func TestRecorderFail(t *testing.T) {
	r := NewRecorder()
	done := make(chan struct{})
	if err := r.Begin("r", 0, 0, func() { close(done) }); err != nil {
		t.Fatal(err)
	}
	r.Fail("r", dms(2), errors.New("start: world unreachable"))
	<-done
	tl, _ := r.Snapshot("r", dms(3))
	if !tl.Finished || !tl.Failed || tl.Error != "start: world unreachable" || tl.Done != dms(2) {
		t.Errorf("timeline = %+v", tl)
	}
	r.RunFinished("r", dms(4), false) // after Fail: ignored, done not called again
}

// TestRecorderConcurrent drives many runs from many goroutines (run it with
// -race) and checks nothing is lost.
func TestRecorderConcurrent(t *testing.T) {
	const runs, steps = 64, 50
	r := NewRecorder()
	var finished atomic.Int32
	for i := range runs {
		if err := r.Begin(fmt.Sprint("run-", i), 0, steps, func() { finished.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range runs {
		id := fmt.Sprint("run-", i)
		for part := range 2 {
			wg.Go(func() {
				for s := part; s < steps; s += 2 {
					r.StepBody(id, engine.StepSpan{Seq: s, Start: time.Duration(s), End: time.Duration(s + 1)})
					r.StepBody("warmup", engine.StepSpan{Seq: s})
				}
			})
		}
	}
	wg.Wait()
	for i := range runs {
		r.RunFinished(fmt.Sprint("run-", i), steps, false)
	}
	if finished.Load() != runs {
		t.Fatalf("%d runs finished; want %d", finished.Load(), runs)
	}
	for i := range runs {
		tl, _ := r.Snapshot(fmt.Sprint("run-", i), 0)
		if len(Steps(&tl)) != steps {
			t.Fatalf("run-%d: %d steps; want %d", i, len(tl.Steps), steps)
		}
	}
}
