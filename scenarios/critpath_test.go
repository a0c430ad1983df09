package scenarios_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/scenarios"
)

// shortOnMem are option values that keep a scenario short in real time.
var shortOnMem = map[string]scenarios.Values{
	"stream-latency":  {"chunks": "10", "interval": "1ms"},
	"stream-overhead": {"chunks": "30", "interval": "1ms"},
	"stream-replay":   {"speed": "8"},
	"stream-sizes":    {"chunks": "30", "interval": "1ms"},
}

// TestCriticalPathSumsExactly runs every scenario of the registry on sim
// (under cloud, so calls queue for capacity) for every version, and on mem,
// and checks that each finished run's critical path tiles [t0, last step
// end] — its categories add up to its TTLS to the nanosecond — and that
// the cell's per-run category microseconds add up exactly to each run's
// TTLS sample.
func TestCriticalPathSumsExactly(t *testing.T) {
	type world struct{ kind, profile string }
	for _, w := range []world{{"sim", "cloud"}, {"sim", "none"}, {"mem", "none"}} {
		versions := engine.Versions()
		if w.kind == "mem" {
			versions = versions[:1]
			if v, err := engine.LookupVersion("resilient-inband"); err == nil {
				versions = append(versions, v)
			}
		}
		for _, v := range versions {
			for _, s := range scenarios.All() {
				var opts scenarios.Values
				if w.kind == "mem" {
					opts = shortOnMem[s.Name]
				}
				t.Run(fmt.Sprintf("%s/%s/%s/%s", w.kind, w.profile, v.Name, s.Name), func(t *testing.T) {
					cw := newWorld(t, w.kind, w.profile, "", 3)
					c := runCell(t, cw, s.Name, opts, v, "", 3)
					checkPaths(t, c.res.Timelines)
				})
			}
		}
	}
}

// checkPaths checks every finished run's path and the cell's per-run
// category values against the runs' TTLS samples.
func checkPaths(t *testing.T, tls []metrics.RunTimeline) {
	t.Helper()
	var ttls []int64
	for i := range tls {
		tl := &tls[i]
		segs, ok := metrics.RunPath(tl)
		if !ok {
			continue
		}
		if !tl.HasEngineSpans() {
			t.Fatalf("run %s: no engine spans", tl.ID)
		}
		d, _ := metrics.TimeToLastStep(tl)
		ttls = append(ttls, max(d, 0).Microseconds())
		if len(segs) == 0 {
			if d > 0 {
				t.Fatalf("run %s: no path for a TTLS of %v", tl.ID, d)
			}
			continue
		}
		if segs[0].Start != tl.T0 || segs[len(segs)-1].End != tl.T0+d {
			t.Fatalf("run %s: path [%v, %v], want [%v, %v]", tl.ID, segs[0].Start, segs[len(segs)-1].End, tl.T0, tl.T0+d)
		}
		for j := 1; j < len(segs); j++ {
			if segs[j].Start != segs[j-1].End {
				t.Fatalf("run %s: segment %d starts at %v, the one before ends at %v", tl.ID, j, segs[j].Start, segs[j-1].End)
			}
		}
		tot := metrics.Totals(segs)
		if tot.Sum() != d {
			t.Fatalf("run %s: categories sum to %v, TTLS %v", tl.ID, tot.Sum(), d)
		}
		if un := tot[mustIndex(t, metrics.CatUnattributed)]; un > d/100+time.Millisecond {
			t.Errorf("run %s: %v of %v unattributed: %v", tl.ID, un, d, segs)
		}
	}
	col := metrics.Collect(tls, metrics.Config{})
	if len(ttls) > 0 && col.CriticalPath == nil {
		t.Fatal("no critical path in the collection")
	}
	for r, want := range ttls {
		var sum int64
		for c := range col.CriticalPath {
			sum += col.CriticalPath[c][r]
		}
		if sum != want {
			t.Fatalf("run %d: categories add up to %d µs, TTLS %d µs", r, sum, want)
		}
	}
}

func mustIndex(t *testing.T, cat string) int {
	i, ok := metrics.CategoryIndex(cat)
	if !ok {
		t.Fatalf("no category %s", cat)
	}
	return i
}
