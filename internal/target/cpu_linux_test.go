package target

import (
	"testing"
	"time"
)

// TestParseSteal: steal is the eighth column of /proc/stat's aggregate cpu
// line, in 10 ms ticks; a line that is not the aggregate cpu line, or a
// malformed one, is refused.
func TestParseSteal(t *testing.T) {
	stat := "cpu  2253969 10 394629 1989391 20245 5 35794 176054 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
	steal, ok := parseSteal([]byte(stat))
	if want := 176054 * 10 * time.Millisecond; !ok || steal != want {
		t.Errorf("steal %v, %v; want %v", steal, ok, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 x 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7 -8\n"} {
		if _, ok := parseSteal([]byte(bad)); ok {
			t.Errorf("%q read as a cpu line", bad)
		}
	}
	// The machine's own file reads, and its steal never goes back.
	s0, ok0 := Steal()
	time.Sleep(50 * time.Millisecond)
	s1, ok1 := Steal()
	if !ok0 || !ok1 || s1 < s0 {
		t.Errorf("/proc/stat: steal %v (%v) then %v (%v)", s0, ok0, s1, ok1)
	}
}
