// Package hdr checks an HDR histogram in its base64 V2 compressed encoding
// (the "HISTFAAA..." text of results files and recorded latency files)
// before it is decoded. A decoder allocates the histogram's whole counts
// array from the range and precision its header declares, so a 60-byte
// encoding may ask for 100 MB (1..2^62 at 5 digits): Decode reads the
// header first and refuses a histogram larger than the caller allows.
package hdr

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ErrTooLarge is wrapped by Decode's error for a histogram whose counts
// array would exceed the limit.
var ErrTooLarge = errors.New("histogram too large")

// Range is the geometry a histogram's header declares.
type Range struct {
	// Lowest and Highest are the trackable values; Digits the significant
	// decimal digits (0-5).
	Lowest, Highest int64
	Digits          int
	// Counts is the length of the counts array a decoder allocates (8
	// bytes each).
	Counts int64
}

// String is "lowest..highest at N digits".
func (r Range) String() string {
	return fmt.Sprintf("%d..%d at %d digits", r.Lowest, r.Highest, r.Digits)
}

// Header reads the geometry from an encoded histogram's header, without
// decoding its counts.
func Header(encoded []byte) (Range, error) {
	// The base64 of the 8-byte outer header and the compressed stream's
	// start; 40 bytes of inflated header need far fewer than 1 KiB.
	head := encoded[:min(len(encoded), 1024)]
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(string(head))
	if err != nil && len(head) == len(encoded) {
		return Range{}, fmt.Errorf("hdr: %w", err)
	}
	if len(raw) < 8 {
		return Range{}, errors.New("hdr: encoding too short")
	}
	if cookie := int32(binary.BigEndian.Uint32(raw)) &^ 0xf0; cookie != 0x1c849304 {
		return Range{}, fmt.Errorf("hdr: not a V2 compressed histogram (cookie %#x)", cookie)
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[8:]))
	if err != nil {
		return Range{}, fmt.Errorf("hdr: %w", err)
	}
	var h [40]byte
	if _, err := io.ReadFull(z, h[:]); err != nil {
		return Range{}, fmt.Errorf("hdr: header: %w", err)
	}
	r := Range{
		Digits:  int(int32(binary.BigEndian.Uint32(h[12:]))),
		Lowest:  int64(binary.BigEndian.Uint64(h[16:])),
		Highest: int64(binary.BigEndian.Uint64(h[24:])),
	}
	if r.Digits < 0 || r.Digits > 5 {
		return r, fmt.Errorf("hdr: %d significant digits, want 0-5", r.Digits)
	}
	r.Counts = counts(max(r.Lowest, 1), r.Highest, r.Digits)
	return r, nil
}

// counts is the counts array length of a histogram of that geometry, as
// hdrhistogram-go computes it.
func counts(lowest, highest int64, digits int) int64 {
	subBucketCountMag := int64(math.Ceil(math.Log2(2 * math.Pow10(digits))))
	subBucketHalfCountMag := max(subBucketCountMag, 1) - 1
	unitMag := max(int64(math.Floor(math.Log2(float64(lowest)))), 0)
	if unitMag+subBucketHalfCountMag > 61 {
		return math.MaxInt64 // the decoder refuses it
	}
	subBucketCount := int64(1) << (subBucketHalfCountMag + 1)
	smallestUntrackable := subBucketCount << unitMag
	buckets := int64(1)
	for smallestUntrackable <= highest {
		if smallestUntrackable > math.MaxInt64/2 {
			buckets++
			break
		}
		smallestUntrackable <<= 1
		buckets++
	}
	return (buckets + 1) * (subBucketCount / 2)
}

// Decode decodes an encoded histogram whose counts array holds at most
// maxCounts entries; a larger one is an error wrapping ErrTooLarge.
func Decode(encoded []byte, maxCounts int64) (*hdrhistogram.Histogram, error) {
	r, err := Header(encoded)
	if err != nil {
		return nil, err
	}
	if r.Counts > maxCounts {
		return nil, fmt.Errorf("hdr: %w: %s needs %d MiB, at most %d MiB are read", ErrTooLarge, r, r.Counts*8>>20, maxCounts*8>>20)
	}
	h, err := hdrhistogram.Decode(encoded)
	if err != nil {
		return nil, fmt.Errorf("hdr: %w", err)
	}
	return h, nil
}
