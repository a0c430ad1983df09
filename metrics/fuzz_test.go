package metrics

import "testing"

// FuzzDecodeHistogram: the hdr field of a results file (any base64 text)
// decodes into a histogram whose figures can be read, or is an error.
func FuzzDecodeHistogram(f *testing.F) {
	h := NewHistogram()
	for _, v := range []int64{0, 1, 900, 1200, 1500, 3_600_000_000} {
		h.Record(v)
	}
	f.Add(h.Encode())
	f.Add(NewHistogram().Encode())
	f.Add("HISTFAAAAjunk")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := DecodeHistogram(s)
		if err != nil {
			return
		}
		_ = h.Count()
		_ = h.Bars()
		again, err := DecodeHistogram(h.Encode())
		if err != nil || again.Count() != h.Count() {
			t.Fatalf("re-encoded histogram: %v, count %d vs %d", err, again.Count(), h.Count())
		}
	})
}
