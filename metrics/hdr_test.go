package metrics

import (
	"testing"
	"time"
)

func TestHistogramRoundTrip(t *testing.T) {
	h := NewHistogram()
	for v := int64(1); v <= 10000; v++ {
		h.Record(v)
	}
	h.Record(-5)                      // clamps to 0
	h.Record(2 * HistogramHighest)    // clamps to 1 h
	h.Record(int64(time.Hour / 1000)) // 1 h in µs is in range... of µs? no: 3.6e6 µs
	if h.Overflow() != 1 {
		t.Errorf("Overflow = %d; want 1", h.Overflow())
	}
	if h.Count() != 10003 {
		t.Errorf("Count = %d", h.Count())
	}
	enc := h.Encode()
	d, err := DecodeHistogram(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !d.HDR().Equals(h.HDR()) {
		t.Error("decoded histogram differs")
	}
	for _, q := range []float64{0, 50, 75, 90, 99, 100} {
		if a, b := h.Quantile(q), d.Quantile(q); a != b {
			t.Errorf("p%v: %d before, %d after the round trip", q, a, b)
		}
	}
	// 3 significant figures: p50 of 1..10000 within 0.1%.
	if p := h.Quantile(50); p < 4995 || p > 5010 {
		t.Errorf("p50 = %d", p)
	}
	if h.Max() < HistogramHighest-HistogramHighest/1000 {
		t.Errorf("Max = %d; want ≈ %d (clamped)", h.Max(), HistogramHighest)
	}
	if len(d.Bars()) == 0 {
		t.Error("no bars")
	}
}

func TestDecodeHistogramRejectsGarbage(t *testing.T) {
	for _, s := range []string{"", "not base64!", "AAAA", "HIST"} {
		if _, err := DecodeHistogram(s); err == nil {
			t.Errorf("DecodeHistogram(%q): no error", s)
		}
	}
}

func TestQuantileNearestRank(t *testing.T) {
	ten := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		values []int64
		q      float64
		want   int64
	}{
		{nil, 50, 0},
		{[]int64{7}, 0, 7},
		{[]int64{7}, 99, 7},
		{ten, 0, 1},
		{ten, 50, 5},  // ceil(5) − 1 = 4
		{ten, 75, 8},  // ceil(7.5) − 1 = 7
		{ten, 90, 9},  // ceil(9) − 1 = 8
		{ten, 99, 10}, // ceil(9.9) − 1 = 9
		{ten, 100, 10},
		{[]int64{1, 2, 3}, 50, 2},
		{[]int64{1, 2, 3, 4}, 50, 2},
	}
	for _, tc := range tests {
		if got := Quantile(tc.values, tc.q); got != tc.want {
			t.Errorf("Quantile(%v, %v) = %d; want %d", tc.values, tc.q, got, tc.want)
		}
	}
}
