package target_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
)

// shortOverTheProtocol are option values that keep a scenario short in
// real time.
var shortOverTheProtocol = map[string]map[string]string{
	"fanout":          {"branches": "20"},
	"sequential":      {"steps": "10"},
	"stream-latency":  {"chunks": "10", "interval": "1ms"},
	"stream-overhead": {"chunks": "30", "interval": "1ms"},
	"stream-replay":   {"speed": "8"},
	"stream-sizes":    {"chunks": "30", "interval": "1ms"},
	"stream-pipeline": {"chunks": "30", "size": "1KB"},
}

// TestTargetCriticalPathSumsExactly: every scenario of the book on the
// reference served over the protocol, its span events asked for: every
// finished run's critical path, walked on the target's spans converted to
// the driver's clock, tiles [t0, last step end] — its categories add up to
// its TTLS to the nanosecond — and the cell's per-run category
// microseconds add up exactly to each run's TTLS sample, as on the
// built-in engine (scenarios.TestCriticalPathSumsExactly). The target's
// span ids never meet the driver's driver_lag span.
func TestTargetCriticalPathSumsExactly(t *testing.T) {
	hs := serveReference(t, "pending-count")
	for i, s := range scenarios.All() {
		t.Run(s.Name, func(t *testing.T) {
			res, err := runCellSpans(t, hs.URL, fmt.Sprint("cp", i), s.Name, shortOverTheProtocol[s.Name], 3, "stream", true)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Timelines) != 3 {
				t.Fatalf("%d timelines, want 3", len(res.Timelines))
			}
			checkTargetPaths(t, res.Timelines)
		})
	}
	// Batch polls and per-run polls carry them alike.
	for _, mode := range modes[1:] {
		t.Run("fanout/"+mode, func(t *testing.T) {
			res, err := runCellSpans(t, hs.URL, "cp-"+mode, "fanout", map[string]string{"branches": "64"}, 3, mode, true)
			if err != nil {
				t.Fatal(err)
			}
			checkTargetPaths(t, res.Timelines)
		})
	}
}

// checkTargetPaths checks each finished run's spans and path, and the
// cell's per-run category values against the runs' TTLS samples.
func checkTargetPaths(t *testing.T, tls []metrics.RunTimeline) {
	t.Helper()
	var ttls []int64
	for i := range tls {
		tl := &tls[i]
		if !tl.Finished || tl.Failed {
			t.Fatalf("run %s: finished %v failed %v (%s)", tl.ID, tl.Finished, tl.Failed, tl.Error)
		}
		lags := 0
		for _, sp := range tl.Spans {
			switch {
			case sp.Category == metrics.CatDriverLag:
				lags++
				if sp.ID != 0 {
					t.Fatalf("run %s: the driver_lag span has id %d", tl.ID, sp.ID)
				}
			case sp.ID != 0 && sp.ID&metrics.TargetSpanIDs == 0, sp.Parent != 0 && sp.Parent&metrics.TargetSpanIDs == 0,
				sp.After != 0 && sp.After&metrics.TargetSpanIDs == 0:
				t.Fatalf("run %s: a target's span %+v outside the target's ids", tl.ID, sp)
			}
		}
		if lags != 1 {
			t.Fatalf("run %s: %d driver_lag spans, want 1", tl.ID, lags)
		}
		segs, ok := metrics.RunPath(tl)
		if !ok {
			continue // a run without steps
		}
		if !tl.HasEngineSpans() {
			t.Fatalf("run %s: no span event from the target", tl.ID)
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
		if tot := metrics.Totals(segs); tot.Sum() != d {
			t.Fatalf("run %s: categories sum to %v, TTLS %v", tl.ID, tot.Sum(), d)
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

// fixedLatencies is a profile of fixed latencies, long enough that the
// protocol's own time (a start's way to the target) is a small part of a
// run's TTLS even on a busy machine under -race.
const fixedLatencies = "default.latency=fixed:5ms,deliver.latency=fixed:30ms"

// profiled is a mem world under fixedLatencies.
func profiled(t *testing.T) world.World {
	t.Helper()
	p, err := profile.Load("none")
	if err != nil {
		t.Fatal(err)
	}
	if p, err = profile.ApplyOverrides(p, fixedLatencies); err != nil {
		t.Fatal(err)
	}
	return profile.Wrap(mem.New(world.Options{Seed: 1}), p, 1)
}

// TestTargetCriticalPathAsInProcess: a fan-out of the built-in engine
// under fixed latencies, run in process and on the reference over the
// protocol (its span events asked for): the path over the protocol leaves
// less than 5% of the TTLS unattributed, and its largest category is the
// in-process path's.
func TestTargetCriticalPathAsInProcess(t *testing.T) {
	const reps = 4
	opts := map[string]string{"branches": "32"}
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := scenarios.Get("fanout")
	p, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		t.Fatal(err)
	}
	w := profiled(t)
	defer w.Close()
	// As runCellSpans drives the target: 4 runs in flight.
	pacer, err := driver.NewPacer("closed", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	in, err := driver.Run(context.Background(), driver.Config{World: w, Features: v.Features, Program: p, RunPrefix: "inproc",
		Reps: reps, Warmup: 1, Pacer: pacer, CellTimeout: time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := protocol.NewServer(context.Background(), reference.New(profiled(t), v))
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, srv)
	over, err := runCellSpans(t, hs, "overproto", "fanout", opts, reps, "stream", true)
	if err != nil {
		t.Fatal(err)
	}
	checkTargetPaths(t, over.Timelines)
	inMeans, inTTLS := pathMeans(t, in.Timelines)
	overMeans, overTTLS := pathMeans(t, over.Timelines)
	un := overMeans[catIndex(t, metrics.CatUnattributed)]
	t.Logf("TTLS mean in process %v, over the protocol %v (%.2f%% unattributed)", inTTLS, overTTLS, 100*float64(un)/float64(overTTLS))
	for i, c := range metrics.Categories {
		t.Logf("  %-12s in process %10v  over the protocol %10v", c.Name, inMeans[i], overMeans[i])
	}
	if un*20 >= overTTLS {
		t.Errorf("over the protocol, %v of a TTLS mean of %v unattributed: 5%% or more", un, overTTLS)
	}
	if a, b := dominant(inMeans), dominant(overMeans); a != b {
		t.Errorf("the largest category in process is %s, over the protocol %s", a, b)
	}
}

// serveHTTP serves srv on loopback until the test ends.
func serveHTTP(t *testing.T, srv *protocol.Server) string {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	return hs.URL
}

// pathMeans are the finished runs' mean time per category on their
// critical paths (indexed like metrics.Categories), and their mean TTLS.
func pathMeans(t *testing.T, tls []metrics.RunTimeline) (means metrics.PathTotals, ttls time.Duration) {
	t.Helper()
	n := 0
	for i := range tls {
		segs, ok := metrics.RunPath(&tls[i])
		if !ok {
			t.Fatalf("run %s: no critical path (finished %v, failed %v: %s)", tls[i].ID, tls[i].Finished, tls[i].Failed, tls[i].Error)
		}
		d, _ := metrics.TimeToLastStep(&tls[i])
		for c, v := range metrics.Totals(segs) {
			means[c] += v
		}
		ttls += d
		n++
	}
	for c := range means {
		means[c] /= time.Duration(n)
	}
	return means, ttls / time.Duration(n)
}

// dominant is the category that holds the most time.
func dominant(p metrics.PathTotals) string {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return metrics.Categories[best].Name
}

func catIndex(t *testing.T, name string) int {
	t.Helper()
	i, ok := metrics.CategoryIndex(name)
	if !ok {
		t.Fatalf("no category %s", name)
	}
	return i
}

// TestSpanOf: a span event becomes a span of the run's timeline on the
// driver's clock, its ids in the target's part of the id space; one
// durabench cannot place is left out, and CheckSpan says why.
func TestSpanOf(t *testing.T) {
	conv := func(at int64) time.Duration { return time.Duration(at) - time.Second } // the target's clock 1 s ahead
	ev := protocol.Event{Kind: protocol.EventSpan, At: int64(time.Second + 10), End: int64(time.Second + 50), Category: "write",
		Name: "step_completed", Stage: 0, Index: 3, SpanID: 7, Parent: 2, After: 5, Wait: 15}
	sp, ok := target.SpanOf(ev, conv)
	if err := target.CheckSpan(ev); !ok || err != nil {
		t.Fatalf("a sound span: ok %v, %v", ok, err)
	}
	want := metrics.Span{Category: "write", Name: "step_completed", Start: 10, End: 50, Wait: 15, Stage: 0, Index: 3,
		ID: 7 | metrics.TargetSpanIDs, Parent: 2 | metrics.TargetSpanIDs, After: 5 | metrics.TargetSpanIDs}
	if sp != want {
		t.Fatalf("SpanOf: %+v, want %+v", sp, want)
	}
	// No step (0.0 on anything but a body), no ids, a wait over the span.
	sp, _ = target.SpanOf(protocol.Event{Kind: protocol.EventSpan, At: 100, End: 130, Category: "compute", Wait: 99}, conv)
	if sp.Stage != -1 || sp.Index != -1 || sp.ID != 0 || sp.Parent != 0 || sp.Wait != 30 {
		t.Fatalf("a span about no step, with no ids and a long wait: %+v", sp)
	}
	if sp, _ = target.SpanOf(protocol.Event{Kind: protocol.EventSpan, At: 100, End: 130, Category: "body"}, conv); sp.Stage != 0 || sp.Index != 0 {
		t.Fatalf("a body span of step 0.0: %+v", sp)
	}
	for _, tc := range []struct {
		ev     protocol.Event
		placed bool
		why    string
	}{
		{protocol.Event{At: 5, End: 9, Category: "network"}, false, "not one of durabench's critical-path categories"},
		{protocol.Event{At: 5, End: 9}, false, "no category"},
		{protocol.Event{At: 5, End: 9, Category: "driver_lag"}, false, "the driver's own"},
		{protocol.Event{At: 9, End: 5, Category: "write"}, false, "before at"},
		{protocol.Event{At: 5, End: 9, Category: "write", Wait: 5}, true, "wait 5ns outside the span's 4ns"},
		{protocol.Event{At: 5, End: 9, Category: "write", Parent: -1}, true, "parent -1"},
		{protocol.Event{At: 5, End: 9, Category: "write", SpanID: 3, After: 3}, true, "refers to itself"},
	} {
		tc.ev.Kind = protocol.EventSpan
		_, placed := target.SpanOf(tc.ev, conv)
		err := target.CheckSpan(tc.ev)
		if placed != tc.placed || err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%+v: placed %v, %v; want placed %v and %q", tc.ev, placed, err, tc.placed, tc.why)
		}
	}
}

// TestProtocolCategoriesAreTheMetrics: the categories the protocol names
// for adapters are the critical path's, every one but driver_lag.
func TestProtocolCategoriesAreTheMetrics(t *testing.T) {
	got := []string{protocol.CatStart, protocol.CatQueueWait, protocol.CatLogLoad, protocol.CatWrite, protocol.CatPublish,
		protocol.CatRunRead, protocol.CatCompute, protocol.CatBody, protocol.CatContention, protocol.CatUnattributed}
	var want []string
	for _, c := range metrics.Categories {
		if c.Name != metrics.CatDriverLag {
			want = append(want, c.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("protocol categories %v, want %v", got, want)
	}
	var l protocol.SpanList
	if a, b := l.Add(protocol.Event{At: 5, End: 3}), l.Add(protocol.Event{At: 1, End: 2, Source: protocol.SourceHistory}); a != 1 || b != 2 ||
		l[0].End != 5 || l[0].Kind != protocol.EventSpan || l[0].Source != protocol.SourceWorker || l[1].Source != protocol.SourceHistory {
		t.Errorf("SpanList: ids %d %d, spans %+v", a, b, l)
	}
}

// misnamed is the reference whose publish spans come with a category
// durabench does not know.
type misnamed struct{ *reference.Reference }

func (m misnamed) Open(ctx context.Context, sink protocol.Sink) error {
	return m.Reference.Open(ctx, misnamedSink{sink})
}

type misnamedSink struct{ protocol.Sink }

func (s misnamedSink) Event(run string, ev protocol.Event) {
	if ev.Kind == protocol.EventSpan && ev.Category == metrics.CatPublish {
		ev.Category = "gc_pause"
	}
	s.Sink.Event(run, ev)
}

// TestDroppedSpansCounted: span events durabench cannot place are counted
// by the session with the first one's reason, never dropped silently
// (the cell's dropped_spans; the report flags it).
func TestDroppedSpansCounted(t *testing.T) {
	v, _ := engine.LookupVersion("pending-count")
	url := serveBackend(t, misnamed{reference.New(mem.New(world.Options{}), v)})
	ctx := context.Background()
	opts := map[string]string{"branches": "8"}
	sc, _ := scenarios.Get("fanout")
	p, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		t.Fatal(err)
	}
	local := mem.New(world.Options{})
	defer local.Close()
	sess, err := target.NewSession(ctx, client(t, url, "stream"), "fanout", opts, local.Runtime())
	if err != nil {
		t.Fatal(err)
	}
	sess.Spans = true
	pacer, _ := driver.NewPacer("closed", 1, 0)
	res, err := driver.Run(ctx, driver.Config{World: local, Program: p, RunPrefix: "drop", Reps: 2,
		Pacer: pacer, CellTimeout: 30 * time.Second, Target: sess})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timelines) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Timelines))
	}
	ps := sess.Polls()
	// Each run publishes its steps' messages.
	if ps.DroppedSpans < 2 || !strings.Contains(ps.FirstDropped, `category "gc_pause"`) {
		t.Fatalf("dropped %d spans (%q), want each run's publishes counted with the reason", ps.DroppedSpans, ps.FirstDropped)
	}
	for _, tl := range res.Timelines {
		for _, sp := range tl.Spans {
			if sp.Category == "gc_pause" {
				t.Fatalf("run %s kept a span of an unknown category", tl.ID)
			}
		}
	}
}
