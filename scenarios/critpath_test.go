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
					checkPaths(t, c.res.Timelines, w.kind == "sim")
				})
			}
		}
	}
}

// checkPaths checks every finished run's path and the cell's per-run
// category values against the runs' TTLS samples. In virtual time no
// time on the path is unattributed. In real time a little is, not
// counting the driver's two hand-offs to the engine, which no engine span
// covers: a run's start (the gap after its driver lag) and a hook's resume
// (the gap before the engine's resume task: the driver's resume goroutine
// being scheduled, milliseconds on a loaded machine).
func checkPaths(t *testing.T, tls []metrics.RunTimeline, virtual bool) {
	t.Helper()
	col := metrics.Collect(tls, metrics.Config{})
	ttls := checkPathsTo(t, "TTLS", tls, virtual, metrics.RunPath, func(tl *metrics.RunTimeline) time.Duration {
		d, _ := metrics.TimeToLastStep(tl)
		return d
	})
	checkSums(t, "TTLS", col.CriticalPath, ttls)
	ttc := checkPathsTo(t, "TTC", tls, virtual, metrics.RunCompletionPath, metrics.TimeToCompletion)
	checkSums(t, "TTC", col.CompletionPath, ttc)
}

// checkPathsTo checks each finished run's path to its metric (TTLS: path
// and value; TTC: the same) and returns the runs' values in µs.
func checkPathsTo(t *testing.T, metric string, tls []metrics.RunTimeline, virtual bool,
	path func(*metrics.RunTimeline) ([]metrics.PathSegment, bool), value func(*metrics.RunTimeline) time.Duration) []int64 {
	t.Helper()
	var ttls []int64
	for i := range tls {
		tl := &tls[i]
		segs, ok := path(tl)
		if !ok {
			continue
		}
		if !tl.HasEngineSpans() {
			t.Fatalf("run %s: no engine spans", tl.ID)
		}
		d := value(tl)
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
			t.Fatalf("run %s: categories sum to %v, %s %v", tl.ID, tot.Sum(), metric, d)
		}
		var un time.Duration
		for j, s := range segs {
			handOff := j > 0 && segs[j-1].Category == metrics.CatDriverLag || j+1 < len(segs) && segs[j+1].Name == engine.SpanResume.String()
			if s.Category == metrics.CatUnattributed && (virtual || !handOff) {
				un += s.End - s.Start
			}
		}
		if virtual && un > 0 || un > d/100+time.Millisecond {
			t.Errorf("run %s: %v of %s %v unattributed: %v", tl.ID, un, metric, d, segs)
		}
	}
	return ttls
}

// checkSums checks a collection's per-run category values (CriticalPath,
// CompletionPath) against the runs' samples in µs.
func checkSums(t *testing.T, metric string, path [][]int64, want []int64) {
	t.Helper()
	if len(want) > 0 && path == nil {
		t.Fatalf("no path to %s in the collection", metric)
	}
	for r, w := range want {
		var sum int64
		for c := range path {
			sum += path[c][r]
		}
		if sum != w {
			t.Fatalf("run %d: categories add up to %d µs, %s %d µs", r, sum, metric, w)
		}
	}
}

// TestCriticalPathFixedDelay: on sim with fixed latencies, adding a fixed
// delay to one world call moves, run by run, each category by exactly the
// delay × the number of that call's segments in it on the run's path (the
// call's own category, and start for the start's calls), and nothing else.
func TestCriticalPathFixedDelay(t *testing.T) {
	const base = "default.latency=fixed:2ms,deliver.latency=fixed:3ms"
	const delay = 5 * time.Millisecond
	cases := []struct {
		op    string
		fixed string // the op's latency with the delay
	}{
		{"publish", "fixed:7ms"},
		{"log_load", "fixed:7ms"},
		{"step_completed", "fixed:7ms"},
		{"step_started", "fixed:7ms"},
		{"run_get", "fixed:7ms"},
		{"deliver", "fixed:8ms"},
	}
	type scenario struct {
		name string
		opts scenarios.Values
	}
	for _, sc := range []scenario{{"sequential", scenarios.Values{"steps": "20"}}, {"fanout", scenarios.Values{"branches": "20"}},
		{"hook-step", nil}, {"race", nil}} {
		for _, vn := range []string{"baseline", "resilient-inband", "pending-count"} {
			v, err := engine.LookupVersion(vn)
			if err != nil {
				t.Fatal(err)
			}
			before := runCell(t, newWorld(t, "sim", "none", base, 5), sc.name, sc.opts, v, "", 3)
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", sc.name, vn, c.op), func(t *testing.T) {
					after := runCell(t, newWorld(t, "sim", "none", base+","+c.op+".latency="+c.fixed, 5), sc.name, sc.opts, v, "", 3)
					name := c.op
					if c.op == "deliver" {
						name = "queue"
					}
					moved := 0
					for r := range after.res.Timelines {
						p0, _ := metrics.RunPath(&before.res.Timelines[r])
						p1, ok := metrics.RunPath(&after.res.Timelines[r])
						if !ok {
							t.Fatalf("run %d: no path", r)
						}
						var want metrics.PathTotals
						for _, s := range p1 {
							if s.Name == name {
								i, _ := metrics.CategoryIndex(s.Category)
								want[i] += delay
								moved++
							}
						}
						t0, t1 := metrics.Totals(p0), metrics.Totals(p1)
						for i, cat := range metrics.Categories {
							if got := t1[i] - t0[i]; got != want[i] {
								t.Errorf("run %d: %s moved by %v, want %v (%d × %v)", r, cat.Name, got, want[i], want[i]/delay, delay)
							}
						}
					}
					if moved == 0 && c.op != "run_get" && c.op != "log_load" {
						t.Errorf("no %s on any path", c.op)
					}
				})
			}
		}
	}
}

// TestCompletionPathFixedDelay: the path to completion (TTC) ends in the
// run's terminal write; a fixed 5 ms added to that write (run_completed)
// moves each run's TTC path by exactly 5 ms of write and leaves its TTLS
// path as it was, on sim, run by run.
func TestCompletionPathFixedDelay(t *testing.T) {
	const base = "default.latency=fixed:2ms,deliver.latency=fixed:3ms"
	const delay = 5 * time.Millisecond
	write, _ := metrics.CategoryIndex(metrics.CatWrite)
	for _, sc := range []struct {
		name string
		opts scenarios.Values
	}{{"sequential", scenarios.Values{"steps": "20"}}, {"fanout", scenarios.Values{"branches": "20"}}, {"hook-step", nil}} {
		for _, vn := range []string{"baseline", "pending-count"} {
			t.Run(sc.name+"/"+vn, func(t *testing.T) {
				v, err := engine.LookupVersion(vn)
				if err != nil {
					t.Fatal(err)
				}
				before := runCell(t, newWorld(t, "sim", "none", base, 5), sc.name, sc.opts, v, "", 3)
				after := runCell(t, newWorld(t, "sim", "none", base+",run_completed.latency=fixed:7ms", 5), sc.name, sc.opts, v, "", 3)
				for r := range after.res.Timelines {
					b, a := &before.res.Timelines[r], &after.res.Timelines[r]
					c0, _ := metrics.RunCompletionPath(b)
					c1, ok := metrics.RunCompletionPath(a)
					if !ok || len(c1) == 0 {
						t.Fatalf("run %d: no path to completion", r)
					}
					if last := c1[len(c1)-1]; last.Name != "run_completed" || last.End != a.Done {
						t.Errorf("run %d: the path to completion ends in %s %q at %v, want the run_completed write at %v", r, last.Category, last.Name, last.End, a.Done)
					}
					want := metrics.Totals(c0)
					want[write] += delay
					if got := metrics.Totals(c1); got != want {
						t.Errorf("run %d: TTC path %v, want %v (the one before, 5 ms more write)", r, got, want)
					}
					p0, _ := metrics.RunPath(b)
					p1, _ := metrics.RunPath(a)
					if metrics.Totals(p0) != metrics.Totals(p1) {
						t.Errorf("run %d: the TTLS path moved: %v, was %v", r, metrics.Totals(p1), metrics.Totals(p0))
					}
				}
			})
		}
	}
}

// TestCriticalPathSplitsContention: with step_completed writes limited to
// one at a time, the last branch's completion waits for the others: the
// wait shows as contention, the write's own 2 ms as write, and together
// they are the call.
func TestCriticalPathSplitsContention(t *testing.T) {
	v, err := engine.LookupVersion("resilient-inband")
	if err != nil {
		t.Fatal(err)
	}
	c := runCell(t, newWorld(t, "sim", "none", "default.latency=fixed:2ms,step_completed.capacity=1", 5),
		"fanout", scenarios.Values{"branches": "20"}, v, "", 2)
	for r := range c.res.Timelines {
		tl := &c.res.Timelines[r]
		segs, _ := metrics.RunPath(tl)
		byID := map[uint64]metrics.Span{}
		for _, s := range tl.AllSpans() {
			byID[s.ID] = s
		}
		parts := map[uint64]time.Duration{}
		var contention time.Duration
		for _, s := range segs {
			if s.Name == "step_completed" {
				parts[s.Span] += s.End - s.Start
			}
			if s.Category == metrics.CatContention {
				contention += s.End - s.Start
			}
		}
		if contention < 2*time.Millisecond {
			t.Errorf("run %d: contention %v on the path, want the wait behind other completions", r, contention)
		}
		for id, d := range parts {
			if sp := byID[id]; sp.End-sp.Start != d || sp.Wait <= 0 {
				t.Errorf("run %d: step_completed %d on the path for %v, its span %v (wait %v)", r, id, d, sp.End-sp.Start, sp.Wait)
			}
		}
	}
}
