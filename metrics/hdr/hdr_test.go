package hdr

import (
	"errors"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

func encode(t testing.TB, lowest, highest int64, digits int) []byte {
	h := hdrhistogram.New(lowest, highest, digits)
	if err := h.RecordValue(lowest); err != nil {
		t.Fatal(err)
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHeaderCounts: the counts a header declares are what the decoder
// allocates, for every geometry durabench meets.
func TestHeaderCounts(t *testing.T) {
	for _, g := range []struct {
		lo, hi int64
		d      int
	}{{1, 3_600_000_000, 3}, {1, 10_000_000, 3}, {1, 1 << 40, 5}, {1000, 3_600_000_000_000, 2}, {1, 2, 1}, {1, 2048, 3}} {
		b := encode(t, g.lo, g.hi, g.d)
		r, err := Header(b)
		if err != nil {
			t.Fatal(err)
		}
		h, err := hdrhistogram.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if r.Lowest != g.lo || r.Highest != g.hi || r.Digits != g.d || r.Counts != int64(len(h.Export().Counts)) {
			t.Errorf("%d..%d/%d: header %v (%d counts), decoder allocated %d counts", g.lo, g.hi, g.d, r, r.Counts, len(h.Export().Counts))
		}
	}
}

// TestDecodeRefusesLarge: a 60-byte histogram of 1..2^62 at 5 digits asks
// for ~50 MB of counts: refused before it is allocated.
func TestDecodeRefusesLarge(t *testing.T) {
	b := encode(t, 1, 1<<62, 5)
	if _, err := Decode(b, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d-byte histogram of 1..2^62 at 5 digits: %v, want ErrTooLarge", len(b), err)
	}
	if _, err := Decode(encode(t, 1, 3_600_000_000, 3), 1<<20); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecode: any text decodes within its limit or is refused.
func FuzzDecode(f *testing.F) {
	f.Add(encode(f, 1, 3_600_000_000, 3))
	f.Add(encode(f, 1, 1<<62, 5))
	f.Add([]byte("HISTFAAAAjunk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b, 1<<16)
		if err != nil {
			return
		}
		if n := len(h.Export().Counts); n > 1<<16 {
			t.Fatalf("decoded %d counts, limit %d", n, 1<<16)
		}
	})
}
