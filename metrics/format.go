package metrics

import (
	"fmt"
	"math"
)

// FormatMicros renders a duration given in microseconds with four
// significant figures and the largest unit that keeps it >= 1 (e.g.
// "850.0µs", "12.35ms", "1.234s"), as benchstat renders sec/op.
func FormatMicros(us float64) string {
	switch {
	case math.IsNaN(us):
		return "-"
	case math.IsInf(us, 0):
		return "∞"
	}
	neg := ""
	if us < 0 {
		neg, us = "-", -us
	}
	var v float64
	var unit string
	switch {
	case us == 0:
		return "0s"
	case us < 1:
		v, unit = us*1000, "ns"
	case us < 1e3:
		v, unit = us, "µs"
	case us < 1e6:
		v, unit = us/1e3, "ms"
	default:
		v, unit = us/1e6, "s"
	}
	return neg + sig4(v) + unit
}

// sig4 formats v (>= 0) with four significant figures.
func sig4(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
