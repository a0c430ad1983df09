package scenarios

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
)

// A cadence is a stream's timing: a list of [offset_ms, bytes] tuples, chunk
// i written offset_ms after the writer starts with bytes bytes (a captured
// LLM token stream). Its identity is the SHA-256 of its canonical tuples.

// maxCadenceChunks bounds a cadence file.
const maxCadenceChunks = 1 << 20

// Cadence is a loaded cadence with its identity.
type Cadence struct {
	Chunks []engine.CadenceChunk
	// SHA256 is the hex SHA-256 of Canonical(Chunks).
	SHA256 string
}

// BuiltinCadences names the synthetic cadences durabench generates
// (SyntheticCadence); examples/cadences holds each as a file.
var BuiltinCadences = []string{"steady", "bursty", "pauses"}

// LoadCadence returns the built-in cadence of that name, or reads the JSON
// file at that path. A file's error names the file and the first bad
// entry.
func LoadCadence(nameOrPath string) (Cadence, error) {
	if slices.Contains(BuiltinCadences, nameOrPath) {
		cs := SyntheticCadence(nameOrPath)
		return Cadence{Chunks: cs, SHA256: cadenceSHA(cs)}, nil
	}
	b, err := readCadenceFile(nameOrPath)
	if err != nil {
		return Cadence{}, errorf(ErrInvalid, "option cadence: %q is neither a built-in cadence (%s) nor a readable file: %v",
			nameOrPath, strings.Join(BuiltinCadences, ", "), err)
	}
	cs, err := ParseCadence(b)
	if err != nil {
		return Cadence{}, errorf(ErrInvalid, "option cadence: %s: %v", nameOrPath, err)
	}
	return Cadence{Chunks: cs, SHA256: cadenceSHA(cs)}, nil
}

// maxCadenceFile bounds a cadence file's size: 64 MB.
const maxCadenceFile = 64 << 20

// readCadenceFile reads a regular file of at most maxCadenceFile bytes (a
// device or a pipe named by mistake must not hang the plan).
func readCadenceFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if st.Size() > maxCadenceFile {
		return nil, fmt.Errorf("%d bytes, over the %d MB limit", st.Size(), maxCadenceFile>>20)
	}
	return io.ReadAll(io.LimitReader(f, maxCadenceFile+1))
}

// ParseCadence reads a cadence document: a JSON list of [offset_ms, bytes],
// offsets (milliseconds, fractions allowed) not decreasing, bytes a whole
// number of at least 1.
func ParseCadence(b []byte) ([]engine.CadenceChunk, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON list of [offset_ms, bytes]: %v", err)
	}
	if len(raw) == 0 || len(raw) > maxCadenceChunks {
		return nil, fmt.Errorf("%d entries, want 1 to %d", len(raw), maxCadenceChunks)
	}
	out := make([]engine.CadenceChunk, len(raw))
	for i, r := range raw {
		var t []float64
		if err := json.Unmarshal(r, &t); err != nil || len(t) != 2 {
			return nil, fmt.Errorf("entry %d: %s is not [offset_ms, bytes]", i, r)
		}
		ms, n := t[0], t[1]
		switch {
		case math.IsNaN(ms) || ms < 0 || ms > float64(24*time.Hour/time.Millisecond):
			return nil, fmt.Errorf("entry %d: offset_ms %v is not between 0 and 24 h", i, ms)
		case n < 1 || n != math.Trunc(n) || n > maxBytes:
			return nil, fmt.Errorf("entry %d: bytes %v is not a whole number from 1 to %d", i, n, maxBytes)
		}
		out[i] = engine.CadenceChunk{Offset: time.Duration(math.Round(ms * float64(time.Millisecond))), Bytes: int(n)}
		if i > 0 && out[i].Offset < out[i-1].Offset {
			return nil, fmt.Errorf("entry %d: offset_ms %v is before the previous entry's", i, ms)
		}
	}
	return out, nil
}

// Canonical is a cadence's canonical form, the input of its SHA-256: the
// JSON list [[offset_ms,bytes],...] without spaces, offsets in shortest
// decimal milliseconds (nanosecond precision), and a final newline.
func Canonical(cs []engine.CadenceChunk) []byte {
	b := make([]byte, 0, 12*len(cs)+2)
	b = append(b, '[')
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendFloat(b, float64(c.Offset)/float64(time.Millisecond), 'f', -1, 64)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Bytes), 10)
		b = append(b, ']')
	}
	return append(b, ']', '\n')
}

func cadenceSHA(cs []engine.CadenceChunk) string {
	sum := sha256.Sum256(Canonical(cs))
	return hex.EncodeToString(sum[:])
}

// CadenceSHA256 is the SHA-256 of p's replayed cadence ("" when p replays
// none): what a stream-replay cell records as cadence_sha256.
func CadenceSHA256(p engine.Program) string {
	if s := Stream(p); s != nil && len(s.Cadence) > 0 {
		return cadenceSHA(s.Cadence)
	}
	return ""
}

// SyntheticCadence generates a built-in cadence; each is fixed (a seeded
// generator), so its SHA-256 never changes:
//
//   - steady: 200 tokens at 50 per second (one every 20 ms), 3 to 8 bytes
//     each — a model streaming at an even rate (4 s).
//   - bursty: 200 tokens in bursts of 4 to 16 tokens 1 ms apart, the bursts
//     60 to 180 ms apart — a provider that batches its server-sent events.
//   - pauses: 240 tokens at 40 per second with a 1.5 s pause after the
//     60th, a 2.5 s pause after the 120th and a 1 s pause after the 180th
//     — tool calls in the middle of an answer (11 s).
//
// Token sizes are drawn uniformly from 3 to 8 bytes (English BPE tokens
// with their leading space).
func SyntheticCadence(name string) []engine.CadenceChunk {
	rng := rand.New(rand.NewPCG(31, uint64(len(name))))
	tok := func() int { return 3 + rng.IntN(6) }
	var out []engine.CadenceChunk
	at := time.Duration(0)
	emit := func() { out = append(out, engine.CadenceChunk{Offset: at, Bytes: tok()}) }
	switch name {
	case "steady":
		for range 200 {
			emit()
			at += 20 * time.Millisecond
		}
	case "bursty":
		for len(out) < 200 {
			for range min(4+rng.IntN(13), 200-len(out)) {
				emit()
				at += time.Millisecond
			}
			at += time.Duration(60+rng.IntN(121)) * time.Millisecond
		}
	case "pauses":
		pause := map[int]time.Duration{60: 1500 * time.Millisecond, 120: 2500 * time.Millisecond, 180: time.Second}
		for i := range 240 {
			at += pause[i]
			emit()
			at += 25 * time.Millisecond
		}
	default:
		return nil
	}
	return out
}
