//go:build !race

package metrics

import (
	"testing"

	"github.com/durabench/durabench/engine"
)

// TestStepBodyDoesNotAllocate checks the hot path stays allocation-free when
// Begin sized the run (the race detector instruments allocations, hence the
// build tag).
func TestStepBodyDoesNotAllocate(t *testing.T) {
	r := NewRecorder()
	const n = 1000
	if err := r.Begin("run-000042", 0, n+10, nil); err != nil {
		t.Fatal(err)
	}
	s := engine.StepSpan{Seq: 1}
	if a := testing.AllocsPerRun(n, func() { r.StepBody("run-000042", s) }); a != 0 {
		t.Errorf("StepBody allocates %v per call", a)
	}
	if a := testing.AllocsPerRun(n, func() { r.StepBody("unknown", s) }); a != 0 {
		t.Errorf("StepBody on an unknown run allocates %v per call", a)
	}
}
