package traces_test

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/reporters/traces"
)

func plan(t *testing.T, args ...string) *sweep.Plan {
	t.Helper()
	p, err := sweep.ParsePlan(args)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stallSweep is a sim-world sweep in which a step message lost to a failed
// step_created write waits for its 300 s redelivery (virtual time): with a
// cell timeout under that, the run is given up, stalled.
func stallSweep(t *testing.T, cellTimeout string) (*sweep.Outcome, string) {
	t.Helper()
	p := plan(t, "--world", "sim", "--profile", "cloud", "--branches", "64", "--versions", "resilient", "--switches", "none",
		"--retry-style", "fresh", "--visibility-timeout", "300s", "--reps", "12", "--warmup", "0",
		"--cell-timeout", cellTimeout, "--seed", "1")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	rec := &traces.Writer{Store: filepath.Join(out, traces.StoreName), Dir: filepath.Join(dir, "traces"),
		Warn: func(err error) { t.Error(err) }}
	res, err := sweep.Run(context.Background(), sweep.Config{Plan: p, Out: out, Progress: rec.Progress(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return res, rec.Dir
}

// readLines reads a --trace-dir file line by line into the official OTLP
// protobuf types, and checks that each line is exactly what writing those
// messages back gives.
func readLines(t *testing.T, dir string) []*tracepb.TracesData {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.otlp.jsonl"))
	if err != nil || len(files) != 1 {
		t.Fatalf("trace files %v, %v", files, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*tracepb.TracesData
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, err := traces.ReadJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		var back bytes.Buffer
		if err := traces.WriteJSON(&back, data); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.TrimSpace(back.Bytes()), line) {
			t.Fatalf("line %d does not round-trip:\n%.300s\n%.300s", len(out)+1, line, back.Bytes())
		}
		again, err := traces.ReadJSON(&back)
		if err != nil || !proto.Equal(data, again) {
			t.Fatalf("line %d: read back differs (%v)", len(out)+1, err)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type trace struct {
	root  *tracepb.Span
	spans []*tracepb.Span
	byID  map[string]*tracepb.Span
}

func traceOf(t *testing.T, d *tracepb.TracesData) trace {
	t.Helper()
	if len(d.ResourceSpans) != 1 || len(d.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("want one resource and one scope per line")
	}
	tr := trace{spans: d.ResourceSpans[0].ScopeSpans[0].Spans, byID: map[string]*tracepb.Span{}}
	for _, s := range tr.spans {
		tr.byID[string(s.SpanId)] = s
		if len(s.TraceId) != 16 || len(s.SpanId) != 8 {
			t.Fatalf("span %q: trace id %d bytes, span id %d bytes", s.Name, len(s.TraceId), len(s.SpanId))
		}
		if len(s.ParentSpanId) == 0 {
			if tr.root != nil {
				t.Fatalf("two root spans: %q, %q", tr.root.Name, s.Name)
			}
			tr.root = s
		}
	}
	for _, s := range tr.spans {
		if p := s.ParentSpanId; len(p) > 0 && tr.byID[string(p)] == nil {
			t.Fatalf("span %q: parent not in the trace", s.Name)
		}
		if s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Fatalf("span %q ends before it starts", s.Name)
		}
	}
	return tr
}

func (tr trace) named(prefix string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range tr.spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func dur(s *tracepb.Span) time.Duration {
	return time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano)
}

// TestStalledRunTrace: the OTLP file of a real sweep round-trips through the
// OpenTelemetry protobuf types; every run is one trace (run → orchestrator
// stage, step → queued, body); the run the cell gave up shows, in red, the
// span of what it was waiting for when it was cut, as long as the wait.
func TestStalledRunTrace(t *testing.T) {
	res, dir := stallSweep(t, "200s")
	cell := res.File.Cells[0]
	var stalled string
	for _, s := range cell.StalledRuns {
		if !s.Finished && !s.NotStarted {
			stalled = s.Run
		}
	}
	if stalled == "" {
		t.Fatalf("no run given up in %+v", cell.StalledRuns)
	}
	lines := readLines(t, dir)
	started := cell.Runs
	for _, s := range cell.StalledRuns {
		if s.NotStarted {
			started--
		}
	}
	if len(lines) != started {
		t.Fatalf("%d traces, %d runs started", len(lines), started)
	}
	seen := false
	for _, d := range lines {
		tr := traceOf(t, d)
		id := strings.TrimPrefix(tr.root.Name, "run ")
		if !bytes.Equal(tr.root.TraceId, traces.TraceID(id)) {
			t.Errorf("%s: trace id not the run's", id)
		}
		if id != stalled {
			if tr.root.Status != nil {
				t.Errorf("%s finished but has status %v", id, tr.root.Status)
			}
			if n := len(tr.named("step ")); n != 64 {
				t.Errorf("%s: %d step spans, want 64", id, n)
			}
			if len(tr.named("queued")) != 64 || len(tr.named("body (attempt")) < 64 {
				t.Errorf("%s: %d queued and %d body spans", id, len(tr.named("queued")), len(tr.named("body (attempt")))
			}
			continue
		}
		seen = true
		if tr.root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(tr.root.Status.Message, "stalled") {
			t.Errorf("stalled run's status: %v", tr.root.Status)
		}
		w := tr.named("waiting: stage 0")
		if len(w) != 1 {
			t.Fatalf("stalled run: waiting spans %v", w)
		}
		if w[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || w[0].EndTimeUnixNano != tr.root.EndTimeUnixNano {
			t.Errorf("waiting span: status %v, ends at %d, the run at %d", w[0].Status, w[0].EndTimeUnixNano, tr.root.EndTimeUnixNano)
		}
		if d := dur(w[0]); d < 100*time.Second {
			t.Errorf("waiting span lasts %v: the run waited for most of the 200 s cell", d)
		}
		t.Logf("%s: %q %v: %s", id, w[0].Name, dur(w[0]), w[0].Status.Message)
	}
	if !seen {
		t.Errorf("no trace of the stalled run %s", stalled)
	}
}

// TestRedeliveredStepTrace: with a cell timeout past the 300 s visibility
// timeout the lost step is redelivered and the run finishes; its trace
// shows where the time went: one step queued for about 300 s.
func TestRedeliveredStepTrace(t *testing.T) {
	res, dir := stallSweep(t, "2h")
	cell := res.File.Cells[0]
	if cell.Stalls == 0 {
		t.Fatalf("no stall: %+v", cell)
	}
	var longest time.Duration
	for _, d := range readLines(t, dir) {
		for _, q := range traceOf(t, d).named("queued") {
			longest = max(longest, dur(q))
		}
	}
	if longest < 290*time.Second || longest > 400*time.Second {
		t.Errorf("longest queued span %v, want about the 300 s visibility timeout", longest)
	}
}

// TestStore: the store keeps every stalled and failed run and a bounded
// number of the others, and a store cut short reads up to the cut.
func TestStore(t *testing.T) {
	var runs []metrics.RunTimeline
	for i := range 1000 {
		tl := metrics.RunTimeline{ID: "c-r" + string(rune('a'+i/26/26%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i%26)),
			Finished: true, Done: time.Duration(i%97) * time.Millisecond}
		switch i {
		case 500:
			tl.Failed = true
		case 700:
			tl.Finished, tl.Cut = false, time.Hour
		}
		runs = append(runs, tl)
	}
	keep := traces.Keep(runs, map[string]bool{runs[900].ID: true})
	if want := traces.KeepPerCell + traces.KeepSlowest + 3; len(keep) != want {
		t.Errorf("kept %d of 1000, want %d", len(keep), want)
	}
	kept := map[string]bool{}
	for _, r := range keep {
		kept[r.ID] = true
	}
	for _, i := range []int{0, traces.KeepPerCell - 1, 500, 700, 900} {
		if !kept[runs[i].ID] {
			t.Errorf("run %d not kept", i)
		}
	}

	path := filepath.Join(t.TempDir(), traces.StoreName)
	c := traces.CellInfo{Label: "a cell", Key: "k"}
	if err := traces.AppendCell(path, c, keep[:3]); err != nil {
		t.Fatal(err)
	}
	if err := traces.AppendCell(path, c, keep[3:]); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-20], 0o644); err != nil { // a sweep killed mid-write
		t.Fatal(err)
	}
	got, err := traces.ReadStore(path, func(id string) bool { return id == keep[1].ID || id == keep[5].ID })
	if err != nil {
		t.Fatal(err)
	}
	// The first cell is whole; of the cut one, what decoded before the cut.
	if len(got) == 0 || len(got[0].Runs) != 1 || got[0].Runs[0].ID != keep[1].ID {
		t.Errorf("read back %+v", got)
	}
}

// TestEveryRecordedSpan: --trace-dir writes every span a run recorded —
// its tasks, world calls, queue waits and bodies — under a "spans" span,
// a task's calls under the task, each queue wait and task linked to the
// span it happens after, and exactly the spans the critical path runs
// through marked durabench.critical_path; the timelines store keeps the
// same spans, and the path found again from them is the path it kept.
func TestEveryRecordedSpan(t *testing.T) {
	p := plan(t, "--world", "sim", "--profile", "cloud", "--branches", "64", "--versions", "resilient",
		"--switches", "none", "--reps", "3", "--warmup", "0", "--seed", "1")
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	rec := &traces.Writer{Store: filepath.Join(out, traces.StoreName), Dir: filepath.Join(dir, "traces"),
		Warn: func(err error) { t.Error(err) }}
	if _, err := sweep.Run(context.Background(), sweep.Config{Plan: p, Out: out, Progress: rec.Progress(nil)}); err != nil {
		t.Fatal(err)
	}
	attr := func(s *tracepb.Span, key string) *commonpb.AnyValue {
		for _, a := range s.Attributes {
			if a.Key == key {
				return a.Value
			}
		}
		return nil
	}
	counts := map[string]int{} // run -> spans in its trace
	lines := readLines(t, rec.Dir)
	if len(lines) != 3 {
		t.Fatalf("%d runs in the trace file, want 3", len(lines))
	}
	for _, d := range lines {
		tr := traceOf(t, d)
		run := attr(tr.root, "durabench.run").GetStringValue()
		boxes := tr.named("spans")
		if len(boxes) != 1 {
			t.Fatalf("%s: %d \"spans\" spans, want 1", run, len(boxes))
		}
		box := boxes[0]
		// Every span under the box, and which of them the path came from.
		under := func(s *tracepb.Span) bool {
			for p := s.ParentSpanId; len(p) > 0; p = tr.byID[string(p)].ParentSpanId {
				if string(p) == string(box.SpanId) {
					return true
				}
			}
			return false
		}
		pathIDs, marked := map[int64]bool{}, map[int64]bool{}
		for _, cp := range tr.named("critical path") {
			for _, s := range tr.spans {
				if string(s.ParentSpanId) == string(cp.SpanId) && attr(s, "durabench.span") != nil {
					pathIDs[attr(s, "durabench.span").GetIntValue()] = true
				}
			}
		}
		n, nested, linked := 0, 0, 0
		for _, s := range tr.spans {
			if !under(s) {
				continue
			}
			n++
			if string(s.ParentSpanId) != string(box.SpanId) {
				nested++
				if parent := tr.byID[string(s.ParentSpanId)]; attr(parent, "durabench.category").GetStringValue() == "" {
					t.Errorf("%s: %q nested under %q, not a recorded span", run, s.Name, parent.Name)
				}
			}
			for _, l := range s.Links {
				linked++
				if tr.byID[string(l.SpanId)] == nil || !under(tr.byID[string(l.SpanId)]) {
					t.Errorf("%s: %q links to a span that is not a recorded span", run, s.Name)
				}
			}
			if v := attr(s, "durabench.critical_path"); v != nil && v.GetBoolValue() {
				marked[attr(s, "durabench.span").GetIntValue()] = true
			}
		}
		if want := int(attr(box, "durabench.spans").GetIntValue()); n != want || n < 64*5 {
			t.Errorf("%s: %d spans under the box, which counts %d (64 branches: at least %d)", run, n, want, 64*5)
		}
		if nested < 64 || linked < 64 {
			t.Errorf("%s: %d spans under a task, %d links: want a task's calls under it and a delivery after its publish", run, nested, linked)
		}
		if len(pathIDs) == 0 || !maps.Equal(pathIDs, marked) {
			t.Errorf("%s: %d spans marked on the path, the path came from %d", run, len(marked), len(pathIDs))
		}
		counts[run] = n
	}

	cells, err := traces.ReadStore(rec.Store, nil)
	if err != nil || len(cells) != 1 {
		t.Fatalf("store: %v, %d cells", err, len(cells))
	}
	for _, run := range cells[0].Runs {
		if len(run.Spans) != counts[run.ID] {
			t.Errorf("%s: the store keeps %d spans, its trace has %d", run.ID, len(run.Spans), counts[run.ID])
		}
		stored := run.Path
		run.Path = nil
		again, ok := metrics.RunPath(&run)
		if !ok || !slices.Equal(again, stored) {
			t.Errorf("%s: the path found from the stored spans (%d segments) is not the stored path (%d)", run.ID, len(again), len(stored))
		}
	}
}
