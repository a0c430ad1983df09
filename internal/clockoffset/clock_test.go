package clockoffset

import (
	"testing"
	"time"
)

func TestEstimate(t *testing.T) {
	// The other clock is 5 s ahead; the second sample has the smallest
	// round trip and a symmetric path.
	samples := []Sample{
		{Send: 0, Recv: 900 * time.Microsecond, Remote: 5*time.Second + 800*time.Microsecond}, // slow way back
		{Send: time.Millisecond, Recv: time.Millisecond + 100*time.Microsecond, Remote: 5*time.Second + time.Millisecond + 50*time.Microsecond},
		{Send: 2 * time.Millisecond, Recv: 2*time.Millisecond + 300*time.Microsecond, Remote: 5*time.Second + 2*time.Millisecond + 10*time.Microsecond},
	}
	c, ok := Estimate(samples)
	if !ok || c.Offset != 5*time.Second || c.RTT != 100*time.Microsecond || c.Samples != 3 {
		t.Fatalf("estimate %+v %v, want offset 5s rtt 100µs", c, ok)
	}
	if got := c.ToDriver(5*time.Second + 7*time.Millisecond); got != 7*time.Millisecond {
		t.Errorf("ToDriver: %v", got)
	}
	if _, ok := Estimate(nil); ok {
		t.Error("no samples: ok")
	}
}
