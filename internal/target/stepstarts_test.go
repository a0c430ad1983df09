package target

import "testing"

// TestStepStarts: a run's step starts are found by step whether it has a
// few in flight or many (past maxFewStarts, a map), each once.
func TestStepStarts(t *testing.T) {
	for _, n := range []int{1, maxFewStarts, 3 * maxFewStarts} {
		var s stepStarts
		for i := range n {
			s.put(stepKey{0, i, 1}, int64(1000+i))
		}
		s.put(stepKey{0, 0, 1}, 7) // a redelivered start replaces the first
		for i := n - 1; i >= 0; i-- {
			want := int64(1000 + i)
			if i == 0 {
				want = 7
			}
			if at, ok := s.take(stepKey{0, i, 1}); !ok || at != want {
				t.Fatalf("%d in flight: step %d's start %d (%v), want %d", n, i, at, ok, want)
			}
			if _, ok := s.take(stepKey{0, i, 1}); ok {
				t.Fatalf("%d in flight: step %d's start taken twice", n, i)
			}
		}
	}
}
