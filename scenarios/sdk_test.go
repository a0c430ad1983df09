package scenarios_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
)

var update = flag.Bool("update", false, "rewrite examples/cadences from the built-in generators")

// cadenceFile is a cadence as examples/cadences holds it: the canonical
// tuples, one per line.
func cadenceFile(cs []engine.CadenceChunk) []byte {
	c := scenarios.Canonical(cs)
	c = bytes.TrimSuffix(bytes.TrimSuffix(bytes.TrimPrefix(c, []byte("[")), []byte("\n")), []byte("]"))
	return []byte("[\n" + strings.ReplaceAll(string(c), "],[", "],\n[") + "\n]\n")
}

// TestCadenceFiles: examples/cadences holds each built-in cadence, and a
// file replays exactly what the built-in name does (same SHA-256).
// go test ./scenarios -run TestCadenceFiles -update rewrites the files.
func TestCadenceFiles(t *testing.T) {
	for _, name := range scenarios.BuiltinCadences {
		path := filepath.Join("..", "examples", "cadences", name+".json")
		want := cadenceFile(scenarios.SyntheticCadence(name))
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not the built-in %s cadence (go test ./scenarios -run TestCadenceFiles -update)", path, name)
		}
		builtin, err := scenarios.LoadCadence(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := scenarios.LoadCadence(path)
		if err != nil {
			t.Fatal(err)
		}
		if builtin.SHA256 != file.SHA256 || len(builtin.SHA256) != 64 {
			t.Errorf("%s: built-in SHA-256 %s, file %s", name, builtin.SHA256, file.SHA256)
		}
		t.Logf("%s: %d chunks over %v, sha256 %s", name, len(file.Chunks), file.Chunks[len(file.Chunks)-1].Offset, file.SHA256)
	}
}

func TestCadenceIdentityAndErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, err := scenarios.LoadCadence(write("a.json", "[[0, 5], [12.5, 3],\n [40, 7]]"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := scenarios.LoadCadence(write("b.json", "[[0.0,5],[12.50,3],[40,7]]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != b.SHA256 || a.Chunks[1].Offset != 12500*time.Microsecond {
		t.Errorf("the same tuples written differently: %s vs %s, offset %v", a.SHA256, b.SHA256, a.Chunks[1].Offset)
	}
	for body, want := range map[string]string{
		"{}":                      "not a JSON list",
		"[]":                      "0 entries",
		"[[0,5],[10]]":            "entry 1",
		"[[0,5],[10,0]]":          "entry 1: bytes 0",
		"[[0,5],[10,2.5]]":        "entry 1: bytes 2.5",
		"[[10,5],[5,1]]":          "entry 1: offset_ms 5 is before",
		"[[-1,5]]":                "entry 0: offset_ms -1",
		`[[0,5],["soon",1]]`:      "entry 1",
		"[[0,5],[1,99999999999]]": "entry 1: bytes",
	} {
		path := write("bad.json", body)
		_, err := scenarios.LoadCadence(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want the file and %q", body, err, want)
		}
	}
	s, _ := scenarios.Get("stream-replay")
	if _, _, err := s.Build(scenarios.Values{"cadence": dir}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory as cadence: %v", err)
	}
	if _, _, err := s.Build(scenarios.Values{"cadence": "no-such-cadence"}); err == nil ||
		!strings.Contains(err.Error(), "steady, bursty, pauses") {
		t.Errorf("unknown cadence: %v", err)
	}
}

// stallWorld holds one chunk write, the first of chunk index, for d: the
// writer's host froze while that chunk was in flight.
type stallWorld struct {
	world.World
	index int
	d     time.Duration
	done  atomic.Bool
}

func (w *stallWorld) WriteChunk(ctx context.Context, stream string, c world.Chunk) error {
	if c.Index == w.index && w.done.CompareAndSwap(false, true) {
		if err := w.Runtime().Sleep(ctx, w.d); err != nil {
			return err
		}
	}
	return w.World.WriteChunk(ctx, stream, c)
}

// TestCDVCatchesOneStalledChunk: one 500 ms stall on one chunk of one of
// ten runs (200 chunks each, a steady cadence under the cloud profile on
// sim) is that run's CDV, while the pooled SL percentiles of the 2,000
// chunks barely move.
func TestCDVCatchesOneStalledChunk(t *testing.T) {
	v, _ := engine.LookupVersion("pending-count")
	cellOf := func(stall bool) cell {
		w := newWorld(t, "sim", "cloud", "", 5)
		if stall {
			w.World = &stallWorld{World: w.World, index: 100, d: 500 * time.Millisecond}
		}
		return runCell(t, w, "stream-replay", nil, v, "", 10)
	}
	calm, stalled := cellOf(false), cellOf(true)
	cdv := stalled.Metrics[metrics.CDV]
	if cdv.Count != 10 || cdv.Max < 500_000 {
		t.Fatalf("CDV of the stalled cell: %d runs, max %d µs; want 10 runs and max >= 500 ms", cdv.Count, cdv.Max)
	}
	caught := 0
	for _, x := range cdv.Values {
		if x >= 500_000 {
			caught++
		}
	}
	if caught != 1 || calm.Metrics[metrics.CDV].Max >= 250_000 {
		t.Errorf("%d runs with CDV >= 500 ms, want 1; the calm cell's CDV max is %d µs", caught, calm.Metrics[metrics.CDV].Max)
	}
	sl, sl0 := stalled.Metrics[metrics.SL], calm.Metrics[metrics.SL]
	if sl.Count != 2000 || sl.Max < 500_000 {
		t.Fatalf("%d chunks read, SL max %d µs; want 2000 and the stalled chunk's 500 ms", sl.Count, sl.Max)
	}
	// The same 2,000 chunks without the stalled one: the pooled percentiles
	// move by one rank at most.
	without := slices.Clone(sl.Values)
	slices.Sort(without)
	without = without[:len(without)-1]
	for _, q := range []struct {
		name string
		q    float64
		got  int64
	}{{"p50", 50, sl.P50}, {"p90", 90, sl.P90}, {"p99", 99, sl.P99}} {
		base := metrics.Quantile(without, q.q)
		if diff := q.got - base; diff < 0 || diff > base/20 {
			t.Errorf("pooled SL %s is %d µs with the stalled chunk, %d without it", q.name, q.got, base)
		}
	}
	t.Logf("one 500 ms stall: CDV max %s ms (calm cell %s ms); pooled SL p50 %d, p90 %d, p99 %d µs, max %s ms "+
		"(calm cell, other draws of cloud's latencies: p50 %d, p90 %d, p99 %d µs, max %s ms)",
		ms(cdv.Max), ms(calm.Metrics[metrics.CDV].Max), sl.P50, sl.P90, sl.P99, ms(sl.Max), sl0.P50, sl0.P90, sl0.P99, ms(sl0.Max))
}

func ms(us int64) string { return strconv.FormatFloat(float64(us)/1e3, 'f', 1, 64) }

// TestFirstEndIsTheFirstToFinish: in a race and a fan-out whose branches
// take 0–200 ms, first_end (the first branch to finish) lies between TTFS
// (the first to start) and TTLS (the last to finish), far from both ends
// of the spread; on sim, a seed replays the same figures.
func TestFirstEndIsTheFirstToFinish(t *testing.T) {
	v, _ := engine.LookupVersion("pending-count")
	for _, name := range []string{"race", "fanout"} {
		opts := scenarios.Values{"branches": "20", "body": "10ms"}
		if name == "race" {
			opts["jitter"] = "200ms"
		}
		c := runCell(t, newWorld(t, "sim", "cloud", "", 3), name, opts, v, "", 5)
		again := runCell(t, newWorld(t, "sim", "cloud", "", 3), name, opts, v, "", 5)
		fe, ttfs, ttls := c.Metrics[metrics.FirstEnd], c.Metrics[metrics.TTFS], c.Metrics[metrics.TTLS]
		if fe.Count != 5 || fe.P50 <= ttfs.P50 || fe.P50 >= ttls.P50 {
			t.Errorf("%s: first_end p50 %d µs (%d runs), want between TTFS %d and TTLS %d", name, fe.P50, fe.Count, ttfs.P50, ttls.P50)
		}
		if name == "race" && ttls.P50-fe.P50 < 100_000 {
			t.Errorf("race: the last branch ended %d µs after the first, want the jitter's spread (≥ 100 ms)", ttls.P50-fe.P50)
		}
		if !equal(fe.Values, again.Metrics[metrics.FirstEnd].Values) {
			t.Errorf("%s: the same seed gave first_end %v, then %v", name, fe.Values, again.Metrics[metrics.FirstEnd].Values)
		}
		t.Logf("%s cloud/sim: TTFS p50 %s ms, first_end p50 %s ms, TTLS p50 %s ms", name, ms(ttfs.P50), ms(fe.P50), ms(ttls.P50))
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
