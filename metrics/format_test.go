package metrics

import (
	"math"
	"testing"
)

func TestFormatMicros(t *testing.T) {
	for _, tc := range []struct {
		us   float64
		want string
	}{
		{0, "0s"}, {0.5, "500.0ns"}, {1, "1.000µs"}, {850, "850.0µs"}, {12345, "12.35ms"},
		{1054000, "1.054s"}, {306000000, "306.0s"}, {-2000, "-2.000ms"}, {math.NaN(), "-"},
	} {
		if got := FormatMicros(tc.us); got != tc.want {
			t.Errorf("FormatMicros(%v) = %q, want %q", tc.us, got, tc.want)
		}
	}
}
