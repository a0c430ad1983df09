package profile

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/metrics/hdr"
)

// maxHDRCounts bounds the counts array of one imported histogram (32 MiB):
// 1 ns..1 h at 5 significant digits fits, a header that asks for more is
// refused before it is decoded.
const maxHDRCounts = 4 << 20

// Unit is the time unit of the values in an imported histogram.
type Unit time.Duration

// Units of imported values. durabench records microseconds, so that is the
// default.
const (
	UnitNanosecond  = Unit(time.Nanosecond)
	UnitMicrosecond = Unit(time.Microsecond)
	UnitMillisecond = Unit(time.Millisecond)
	UnitSecond      = Unit(time.Second)
)

var unitNames = map[string]Unit{"ns": UnitNanosecond, "us": UnitMicrosecond, "ms": UnitMillisecond, "s": UnitSecond}

// Empirical is a latency distribution recorded on a real backend, imported
// from an HDR histogram or a list of values. Sample draws uniformly over the
// recorded values: a value range holding 3% of the recordings is drawn 3% of
// the time, at a uniform position inside the range (HDR histograms keep
// values only to their range of equivalent values).
type Empirical struct {
	source string
	lo, hi []time.Duration // value range of each bucket, sorted by lo
	cum    []int64         // recordings in buckets 0..i
}

// ReadFile reads the recorded-distribution files (hdr) a profile or a fault
// override names, by their resolved path. nil reads the file system.
// ParseWith and ApplyOverridesWith take one so that a profile can be
// parsed where its files are not: a distributed sweep's worker parses the
// driver's profile with the files the driver shipped (see FileSet).
type ReadFile func(path string) ([]byte, error)

// loadHDR reads the recorded distribution in the file at path (see
// ParseHDR) with read, os.ReadFile when nil.
func loadHDR(read ReadFile, path string, unit Unit) (*Empirical, error) {
	if read == nil {
		read = os.ReadFile
	}
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("hdr: %w", err)
	}
	return ParseHDR(path, data, unit)
}

// ParseHDR parses a recorded distribution whose values are in unit; source
// names it in errors and in String. The data holds either
//
//   - HDR histograms in the base64 V2-compressed encoding ("HISTFAAA..."),
//     one per line; a HdrHistogram interval log (lines
//     "start,length,max,HISTFAAA...") also works — all intervals are merged; or
//   - lines "value count" (count 1 when left out), e.g. "20150 42" for 42
//     calls that took 20150 µs.
//
// Blank lines and lines starting with '#' are skipped.
func ParseHDR(source string, data []byte, unit Unit) (*Empirical, error) {
	if unit <= 0 {
		unit = UnitMicrosecond
	}
	type bucket struct {
		lo, hi time.Duration
		n      int64
	}
	var buckets []bucket
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20) // encoded histograms are long lines
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '"' { // comment, log legend
			continue
		}
		fields := strings.Fields(text)
		if v, n, ok := valueLine(fields); ok {
			if v*float64(unit) >= math.MaxInt64 {
				return nil, fmt.Errorf("hdr %s:%d: %s is past the largest duration (%v)", source, line, fields[0], time.Duration(math.MaxInt64))
			}
			d := time.Duration(v * float64(unit))
			if n > 0 {
				buckets = append(buckets, bucket{d, d, n})
			}
			continue
		}
		blob := text[strings.LastIndexByte(text, ',')+1:]
		if !strings.HasPrefix(blob, "HIST") {
			return nil, fmt.Errorf("hdr %s:%d: neither \"value count\" nor a base64 HDR histogram", source, line)
		}
		h, err := hdr.Decode([]byte(blob), maxHDRCounts)
		if err != nil {
			return nil, fmt.Errorf("hdr %s:%d: %w", source, line, err)
		}
		if h.Max() > math.MaxInt64/int64(unit) {
			return nil, fmt.Errorf("hdr %s:%d: values up to %d are past the largest duration (%v)", source, line, h.Max(), time.Duration(math.MaxInt64))
		}
		for _, b := range h.Distribution() {
			if b.Count > 0 {
				buckets = append(buckets, bucket{time.Duration(b.From) * time.Duration(unit), time.Duration(b.To) * time.Duration(unit), b.Count})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hdr %s: %w", source, err)
	}
	if len(buckets) == 0 {
		return nil, fmt.Errorf("hdr %s: no recorded values", source)
	}
	slices.SortStableFunc(buckets, func(a, b bucket) int { return int(a.lo - b.lo) })
	e := &Empirical{source: source}
	var total int64
	for _, b := range buckets {
		total += b.n
		e.lo = append(e.lo, b.lo)
		e.hi = append(e.hi, b.hi)
		e.cum = append(e.cum, total)
	}
	return e, nil
}

// valueLine parses "value" or "value count".
func valueLine(fields []string) (v float64, n int64, ok bool) {
	if len(fields) == 0 || len(fields) > 2 {
		return 0, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v < 0 {
		return 0, 0, false
	}
	n = 1
	if len(fields) == 2 {
		if n, err = strconv.ParseInt(fields[1], 10, 64); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return v, n, true
}

// Count is the number of recorded values.
func (e *Empirical) Count() int64 { return e.cum[len(e.cum)-1] }

// Sample draws one recorded value uniformly.
func (e *Empirical) Sample(r *rand.Rand) time.Duration { return e.at(r.Float64()) }

// Quantile returns the recorded distribution's quantile q.
func (e *Empirical) Quantile(q float64) time.Duration { return e.at(min(max(q, 0), 1)) }

// at maps u in [0, 1] onto the recorded values: the bucket holding rank
// u·total, and the position of that rank inside the bucket's range.
func (e *Empirical) at(u float64) time.Duration {
	rank := u * float64(e.Count())
	i, _ := slices.BinarySearchFunc(e.cum, rank, func(c int64, r float64) int {
		switch {
		case float64(c) < r:
			return -1
		case float64(c) > r:
			return 1
		}
		return 0
	})
	i = min(i, len(e.cum)-1)
	prev := int64(0)
	if i > 0 {
		prev = e.cum[i-1]
	}
	f := (rank - float64(prev)) / float64(e.cum[i]-prev)
	f = min(max(f, 0), 1)
	return e.lo[i] + time.Duration(f*float64(e.hi[i]-e.lo[i]))
}

// Mean returns the mean of the recorded values (bucket midpoints).
func (e *Empirical) Mean() time.Duration {
	var sum float64
	prev := int64(0)
	for i, c := range e.cum {
		sum += float64(c-prev) * (float64(e.lo[i]) + float64(e.hi[i])) / 2
		prev = c
	}
	return time.Duration(sum / float64(e.Count()))
}

func (e *Empirical) String() string { return "hdr:" + e.source }

// FileSet reads files from the file system and keeps what it read, by
// path: parse a profile with Read, then ship Files to where the profile is
// parsed again (ShippedFiles there).
type FileSet struct {
	mu    sync.Mutex
	Files map[string][]byte
}

// Read is a ReadFile that records each file it read.
func (r *FileSet) Read(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Files == nil {
		r.Files = map[string][]byte{}
	}
	r.Files[path] = data
	return data, nil
}

// ShippedFiles is a ReadFile over files recorded elsewhere (FileSet.Files):
// a path it does not hold is an error saying so.
func ShippedFiles(files map[string][]byte) ReadFile {
	return func(path string) ([]byte, error) {
		if data, ok := files[path]; ok {
			return data, nil
		}
		return nil, fmt.Errorf("open %s: not among the files shipped with the profile", path)
	}
}
