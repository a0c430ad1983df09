package metrics

import (
	"fmt"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/durabench/durabench/metrics/hdr"
)

// Histogram range: every sample is in microseconds, 1 µs .. 1 h at 3
// significant figures (a 0.1% worst-case bucket error).
const (
	HistogramLowest  int64 = 1
	HistogramHighest       = int64(time.Hour / time.Microsecond)
	HistogramDigits        = 3
)

// Histogram is an HDR histogram of microsecond samples with durabench's
// fixed range. Samples below 0 record as 0; samples above 1 h record as 1 h
// and are counted by Overflow, so a histogram never silently drops one.
type Histogram struct {
	h        *hdrhistogram.Histogram
	overflow int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(HistogramLowest, HistogramHighest, HistogramDigits)}
}

// Record adds one sample in microseconds.
func (h *Histogram) Record(us int64) {
	if us < 0 {
		us = 0
	}
	if us > HistogramHighest {
		us = HistogramHighest
		h.overflow++
	}
	// In range by construction: RecordValue cannot fail.
	_ = h.h.RecordValue(us)
}

// Count is the number of samples.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Overflow is the number of samples above 1 h (recorded as 1 h). A decoded
// histogram does not know it and reports 0.
func (h *Histogram) Overflow() int64 { return h.overflow }

// Max returns the largest sample (HDR bucket precision).
func (h *Histogram) Max() int64 { return h.h.Max() }

// Bar is one non-empty bucket: Count samples in [From, To] µs.
type Bar = hdrhistogram.Bar

// Bars returns the non-empty buckets in ascending order.
func (h *Histogram) Bars() []Bar {
	var out []Bar
	for _, b := range h.h.Distribution() {
		if b.Count > 0 {
			out = append(out, b)
		}
	}
	return out
}

// Encode returns the base64 text of the histogram's V2 compressed encoding,
// the form results files store.
func (h *Histogram) Encode() string {
	b, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		// Encoding into memory with a supported cookie cannot fail.
		panic(fmt.Sprintf("metrics: encode histogram: %v", err))
	}
	return string(b)
}

// DecodeHistogram parses the text Encode produces. A histogram of another
// range or precision is refused before it is decoded: decoding allocates
// what its header declares (100 MB for a 60-byte header, see package hdr).
func DecodeHistogram(s string) (*Histogram, error) {
	if s == "" {
		return nil, fmt.Errorf("metrics: decode histogram: empty")
	}
	r, err := hdr.Header([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("metrics: decode histogram: %w", err)
	}
	if r.Lowest != HistogramLowest || r.Highest != HistogramHighest || r.Digits != HistogramDigits {
		return nil, fmt.Errorf("metrics: decode histogram: range %v, want %d..%d at %d digits", r,
			HistogramLowest, HistogramHighest, HistogramDigits)
	}
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("metrics: decode histogram: %w", err)
	}
	return &Histogram{h: h}, nil
}

// Quantile returns the exact nearest-rank quantile q (0–100) of sorted
// values: sorted[min(n−1, ⌈q/100·n⌉−1)], the convention engineers already
// read in the reference benchmarks. It returns 0 for no values.
func Quantile(sorted []int64, q float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(n)/100)) - 1
	return sorted[min(n-1, max(i, 0))]
}
