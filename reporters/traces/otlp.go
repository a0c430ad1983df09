// Package traces writes run timelines as OpenTelemetry traces in the
// OTLP/JSON file format, loadable in Jaeger, Tempo or any OTLP viewer, so
// that a person can see where a stalled run's time went: a span per run, per
// orchestrator activation and per step (queued → body → completed), with
// each step body's executions (attempts) and the cell's world incidents as
// events. It also keeps a sweep's timelines on disk (Store) for
// durabench report --format otlp --runs.
//
// The spans are built as the official OTLP protobuf types
// (go.opentelemetry.io/proto/otlp) and written with protojson, the ids in
// hex as OTLP/JSON requires. The SDK's tracer does not fit: the spans are
// past events timed on the world's clock (virtual on the sim world), not
// operations traced as they happen.
package traces

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
)

// ScopeName is the instrumentation scope of every span.
const ScopeName = "github.com/durabench/durabench/reporters/traces"

// CellInfo is what a trace says about the cell its runs belong to.
type CellInfo struct {
	// Label is the cell as progress lines name it; Key identifies it.
	Label string `json:"label"`
	Key   string `json:"key"`
	// Attributes are the cell's dimensions (scenario, branches, version,
	// switches, world, profile, target), set on the resource.
	Attributes map[string]string `json:"attributes"`
	// Epoch is the wall-clock time of the cell's runtime time 0: a
	// timeline's durations are added to it. Virtual says the runtime's clock
	// was virtual (sim world): the times are then the simulation's, laid
	// out from the cell's start.
	Epoch   time.Time `json:"epoch"`
	Virtual bool      `json:"virtual,omitempty"`
	// Program is the workflow the runs executed: its stages tell a
	// stalled run's steps that never ran.
	Program engine.Program `json:"program"`
	// Incidents are the world incidents of the whole cell (the world counts
	// them per cell, not per run).
	Incidents *world.Incidents `json:"incidents,omitempty"`
}

// Service is the service.name of the traces: the engine under test.
func (c CellInfo) service() string {
	if t := c.Attributes["target"]; t != "" {
		return "durabench " + t
	}
	return "durabench reference"
}

// Spans returns the OTLP resource spans of runs, one trace each, under a
// resource describing the cell.
func Spans(c CellInfo, runs []metrics.RunTimeline) *tracepb.ResourceSpans {
	res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", c.service()),
		str("durabench.cell", c.Label)}}
	for _, k := range sortedKeys(c.Attributes) {
		if v := c.Attributes[k]; v != "" {
			res.Attributes = append(res.Attributes, str("durabench."+k, v))
		}
	}
	if c.Virtual {
		res.Attributes = append(res.Attributes, boolean("durabench.virtual_time", true))
	}
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: ScopeName}}
	for i := range runs {
		ss.Spans = append(ss.Spans, runSpans(c, &runs[i])...)
	}
	return &tracepb.ResourceSpans{Resource: res, ScopeSpans: []*tracepb.ScopeSpans{ss}}
}

// builder makes one run's spans.
type builder struct {
	c     CellInfo
	trace []byte
	next  uint64
	spans []*tracepb.Span
}

func (b *builder) ns(d time.Duration) uint64 { return uint64(b.c.Epoch.Add(d).UnixNano()) }

func (b *builder) span(parent *tracepb.Span, name string, start, end time.Duration, attrs ...*commonpb.KeyValue) *tracepb.Span {
	b.next++
	id := make([]byte, 8)
	binary.BigEndian.PutUint64(id, b.next)
	s := &tracepb.Span{TraceId: b.trace, SpanId: id, Name: name, Kind: tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: b.ns(start), EndTimeUnixNano: b.ns(max(end, start)), Attributes: attrs}
	if parent != nil {
		s.ParentSpanId = parent.SpanId
	}
	b.spans = append(b.spans, s)
	return s
}

func event(s *tracepb.Span, at uint64, name string, attrs ...*commonpb.KeyValue) {
	s.Events = append(s.Events, &tracepb.Span_Event{TimeUnixNano: at, Name: name, Attributes: attrs})
}

func fail(s *tracepb.Span, msg string) {
	s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: msg}
}

// TraceID is the trace id of run: derived from its id (unique across a
// sweep's cells), so the same run always has the same trace.
func TraceID(run string) []byte {
	h := sha256.Sum256([]byte("durabench run " + run))
	return h[:16]
}

// runSpans lays one run out:
//
//	run <id>                         scheduled start → terminal event (or the cut)
//	  orchestrator stage S           the stage became ready → its first step body started
//	  step S.I                       the stage became ready → the step's last completion written
//	    queued                       ready → first body start
//	    body (attempt N)             each execution: the body, then its completion write
//	  waiting: stage S               a run given up: from the stage becoming ready to the cut,
//	                                 naming the steps that never ran
//	  hook <token>                   created → resumed
//	  critical path                  t0 → the last step end, when the run recorded spans
//	    <category>: <name>           each segment of the path (metrics.PathSegment)
//	  spans                          every span the run recorded (recordedSpans)
//	    <category>: <name>           a task, a queue wait, a span of the driver or target
//	      <category>: <name>         a task's world calls and step bodies
//
// A stage is ready when the previous one's last step ended (the first
// at the run's scheduled start): what lies between is the engine's
// orchestrator activation (log load, replay, dispatch) and the queue.
func runSpans(c CellInfo, tl *metrics.RunTimeline) []*tracepb.Span {
	b := &builder{c: c, trace: TraceID(tl.ID)}
	end := tl.Cut
	if tl.Finished {
		end = tl.Done
	}
	root := b.span(nil, "run "+tl.ID, tl.T0, end, str("durabench.run", tl.ID),
		boolean("durabench.run.finished", tl.Finished), boolean("durabench.run.failed", tl.Failed))
	root.Kind = tracepb.Span_SPAN_KIND_SERVER
	switch {
	case tl.Failed:
		fail(root, cmp.Or(tl.Error, "run failed"))
	case !tl.Finished:
		fail(root, fmt.Sprintf("stalled: unfinished when the cell gave it up after %v", (tl.Cut-tl.T0).Round(time.Microsecond)))
	}
	if inc := c.Incidents; inc != nil && inc.Total() > 0 {
		event(root, b.ns(tl.T0), "world incidents in this cell", incidentAttrs(*inc)...)
	}

	// Executions by stage, then by index.
	byStage := map[int]map[int][]engine.StepSpan{}
	for _, sp := range tl.Steps {
		if byStage[sp.Stage] == nil {
			byStage[sp.Stage] = map[int][]engine.StepSpan{}
		}
		byStage[sp.Stage][sp.Index] = append(byStage[sp.Stage][sp.Index], sp)
	}
	ready := tl.T0
	for s, st := range c.Program.Stages {
		want := stageSize(st)
		execs := byStage[s]
		if want == 0 {
			continue // a hook stage: its hook span says when it waited
		}
		if len(execs) == 0 {
			if !tl.Finished && !tl.Failed {
				w := b.span(root, fmt.Sprintf("waiting: stage %d", s), ready, end,
					integer("durabench.stage", s), integer("durabench.steps_not_run", want))
				fail(w, fmt.Sprintf("none of the stage's %d steps ran", want))
			}
			break // later stages never became ready
		}
		first, last := time.Duration(1<<62), time.Duration(0)
		for _, idx := range slices.Sorted(maps.Keys(execs)) {
			ex := execs[idx]
			slices.SortFunc(ex, func(x, y engine.StepSpan) int { return cmp.Compare(x.Start, y.Start) })
			stepEnd := ex[0].End
			for _, e := range ex {
				stepEnd = max(stepEnd, e.End)
			}
			first, last = min(first, ex[0].Start), max(last, stepEnd)
		}
		b.span(root, fmt.Sprintf("orchestrator stage %d", s), ready, first, integer("durabench.stage", s),
			integer("durabench.steps", want))
		for _, idx := range slices.Sorted(maps.Keys(execs)) {
			ex := execs[idx]
			stepEnd := ex[0].End
			for _, e := range ex {
				stepEnd = max(stepEnd, e.End)
			}
			step := b.span(root, fmt.Sprintf("step %d.%d", s, idx), ready, stepEnd, integer("durabench.stage", s),
				integer("durabench.index", idx), integer("durabench.seq", ex[0].Seq),
				boolean("durabench.inline", ex[0].Inline), integer("durabench.executions", len(ex)))
			b.span(step, "queued", ready, ex[0].Start)
			for _, e := range ex {
				b.span(step, fmt.Sprintf("body (attempt %d)", e.Attempt), e.Start, e.End,
					integer("durabench.attempt", e.Attempt), boolean("durabench.inline", e.Inline))
				event(step, b.ns(e.Start), "attempt", integer("durabench.attempt", e.Attempt), boolean("durabench.inline", e.Inline))
			}
			if len(ex) > 1 {
				event(step, b.ns(ex[1].Start), "redelivered", integer("durabench.executions", len(ex)))
			}
		}
		if len(execs) < want {
			if !tl.Finished && !tl.Failed {
				w := b.span(root, fmt.Sprintf("waiting: stage %d", s), ready, end, integer("durabench.stage", s),
					integer("durabench.steps_not_run", want-len(execs)))
				fail(w, fmt.Sprintf("%d of the stage's %d steps never ran: %s", want-len(execs), want, missing(execs, want)))
			}
			break
		}
		ready = last
	}
	for _, h := range tl.Hooks {
		hend := end
		if h.WasResumed {
			hend = h.Resumed
		}
		start := h.Created
		if start == 0 && h.WasResumed {
			start = h.Resumed
		}
		hs := b.span(root, "hook "+h.Token, start, hend, str("durabench.hook", h.Token), boolean("durabench.hook.resumed", h.WasResumed))
		if !h.WasResumed && !tl.Finished {
			fail(hs, "never resumed")
		}
	}
	recordedSpans(b, root, tl, pathSpans(b, root, tl))
	if tl.Finished {
		name := "run completed"
		if tl.Failed {
			name = "run failed"
		}
		event(root, b.ns(tl.Done), name)
	}
	return b.spans
}

// stageSize is how many step bodies a stage runs (steps_not_run counts
// against it).
func stageSize(s engine.Stage) int {
	switch s.Kind {
	case engine.StageSteps:
		return s.Steps
	case engine.StageStream:
		return 2
	}
	return 0
}

// missing names the first few step indexes of a stage that never ran.
func missing(execs map[int][]engine.StepSpan, want int) string {
	var out []string
	for i := 0; i < want && len(out) < 8; i++ {
		if _, ok := execs[i]; !ok {
			out = append(out, strconv.Itoa(i))
		}
	}
	s := "steps " + strings.Join(out, ", ")
	if n := want - len(execs); n > len(out) {
		s += fmt.Sprintf(" and %d more", n-len(out))
	}
	return s
}

func incidentAttrs(inc world.Incidents) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for _, k := range []struct {
		name string
		n    int64
	}{{"dropped", inc.Dropped}, {"slow_consumer", inc.SlowConsumer}, {"timeouts", inc.Timeouts},
		{"gaps", inc.Gaps}, {"disconnects", inc.Disconnects}, {"reconnects", inc.Reconnects},
		{"async_errors", inc.AsyncErrors}, {"transient", inc.Transient}} {
		if k.n > 0 {
			out = append(out, integer("durabench.incidents."+k.name, int(k.n)))
		}
	}
	if inc.Last != "" {
		out = append(out, str("durabench.incidents.last", inc.Last))
	}
	return out
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func integer(k string, v int) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(v)}}}
}

func boolean(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// idFields are the OTLP fields that hold bytes: hex in OTLP/JSON, base64
// in protojson (the proto3 JSON mapping).
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// WriteJSON writes data as one OTLP/JSON document (the shape of an
// ExportTraceServiceRequest, which the OTLP file exporter and the
// collector's otlpjsonfile receiver read) on one line: protojson with
// enums as numbers and the ids in hex.
func WriteJSON(w io.Writer, data *tracepb.TracesData) error {
	return writeResources(w, len(data.ResourceSpans), func(i int) *tracepb.ResourceSpans { return data.ResourceSpans[i] })
}

// WriteCells writes the traces of cells' runs as one OTLP/JSON document,
// as WriteJSON does, building and encoding one cell at a time, so a
// document of many cells is never whole in memory.
func WriteCells(w io.Writer, cells []CellRuns) error {
	return writeResources(w, len(cells), func(i int) *tracepb.ResourceSpans { return Spans(cells[i].Cell, cells[i].Runs) })
}

func writeResources(w io.Writer, n int, res func(i int) *tracepb.ResourceSpans) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"resourceSpans":[`)
	for i := range n {
		raw, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(res(i))
		if err != nil {
			return fmt.Errorf("otlp: %w", err)
		}
		out, err := recodeIDs(raw, func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return hex.EncodeToString(b), err
		})
		if err != nil {
			return fmt.Errorf("otlp: %w", err)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(out)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// ReadJSON reads one OTLP/JSON traces document into the official protobuf
// types, strictly: an unknown field or a malformed id is an error.
func ReadJSON(r io.Reader) (*tracepb.TracesData, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	pj, err := recodeIDs(raw, func(s string) (string, error) {
		b, err := hex.DecodeString(s)
		return base64.StdEncoding.EncodeToString(b), err
	})
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	var data tracepb.TracesData
	if err := protojson.Unmarshal(pj, &data); err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	return &data, nil
}

// recodeIDs rewrites the string value of every id field of a JSON
// document with conv.
func recodeIDs(raw []byte, conv func(string) (string, error)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && idFields[k] {
					c, err := conv(s)
					if err != nil {
						return fmt.Errorf("%s %q: %w", k, s, err)
					}
					x[k] = c
					continue
				}
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// pathSpans adds the run's critical path (its Path, else metrics.RunPath
// when its spans were recorded) under root: a "critical path" span from t0
// to the last step end, holding one span per segment named by its
// category, with the engine span it came from. It returns the path.
func pathSpans(b *builder, root *tracepb.Span, tl *metrics.RunTimeline) []metrics.PathSegment {
	path := tl.Path
	if path == nil && tl.HasEngineSpans() {
		path, _ = metrics.RunPath(tl)
	}
	if len(path) == 0 {
		return nil
	}
	cp := b.span(root, "critical path", path[0].Start, path[len(path)-1].End)
	for _, seg := range path {
		name := seg.Category
		if seg.Name != "" {
			name += ": " + seg.Name
		}
		attrs := []*commonpb.KeyValue{str("durabench.category", seg.Category)}
		if seg.Step != "" {
			attrs = append(attrs, str("durabench.step", seg.Step))
		}
		if seg.Span != 0 {
			attrs = append(attrs, integer("durabench.span", int(seg.Span)))
		}
		b.span(cp, name, seg.Start, seg.End, attrs...)
	}
	return path
}

// Recorded returns every span the run recorded (metrics.RunTimeline's
// AllSpans: the built-in engine's tasks, world calls, queue waits and step
// bodies, a target's spans, the driver's lag), each once: a span reported
// twice (a task still running when its run finished reports what it has,
// then all of it when it ends) is its later report, in its place.
func Recorded(tl *metrics.RunTimeline) []metrics.Span {
	all := tl.AllSpans()
	last := make(map[uint64]int, len(all))
	for i := range all {
		if id := all[i].ID; id != 0 {
			last[id] = i
		}
	}
	if len(last) == len(all) {
		return all
	}
	out := all[:0]
	for i := range all {
		if id := all[i].ID; id == 0 || last[id] == i {
			out = append(out, all[i])
		}
	}
	return out
}

// recordedSpans adds every span the run recorded (Recorded) under root, in
// a "spans" span: each named "<category>: <name>" as a path segment is,
// under the span that held it (a task holds its calls and bodies; the
// others sit at the top), with an OTLP link to the span it happens after
// (a delivery's task after its queue wait, that after the publish that
// enqueued the message). A span the critical path runs through (a segment
// came from it) carries durabench.critical_path = true, so that a viewer
// can show the path among every call the run made; a span's wait for
// backend capacity (its contention) is durabench.wait_ns.
func recordedSpans(b *builder, root *tracepb.Span, tl *metrics.RunTimeline, path []metrics.PathSegment) {
	spans := Recorded(tl)
	if len(spans) == 0 {
		return
	}
	onPath := make(map[uint64]bool, len(path))
	for _, seg := range path {
		if seg.Span != 0 {
			onPath[seg.Span] = true
		}
	}
	lo, hi := spans[0].Start, spans[0].End
	for i := range spans {
		lo, hi = min(lo, spans[i].Start), max(hi, spans[i].End)
	}
	box := b.span(root, "spans", lo, hi, integer("durabench.spans", len(spans)))
	made := make([]*tracepb.Span, len(spans))
	byID := make(map[uint64]*tracepb.Span, len(spans))
	for i := range spans {
		sp := &spans[i]
		name := sp.Category
		if sp.Name != "" {
			name += ": " + sp.Name
		}
		attrs := []*commonpb.KeyValue{str("durabench.category", sp.Category)}
		if sp.ID != 0 {
			attrs = append(attrs, integer("durabench.span", int(sp.ID)))
		}
		if sp.Stage >= 0 && sp.Index >= 0 {
			attrs = append(attrs, str("durabench.step", strconv.Itoa(sp.Stage)+"."+strconv.Itoa(sp.Index)))
		}
		if sp.Wait > 0 {
			attrs = append(attrs, integer("durabench.wait_ns", int(sp.Wait)))
		}
		if onPath[sp.ID] {
			attrs = append(attrs, boolean("durabench.critical_path", true))
		}
		made[i] = b.span(box, name, sp.Start, sp.End, attrs...)
		if sp.ID != 0 {
			byID[sp.ID] = made[i]
		}
	}
	for i := range spans {
		if p := byID[spans[i].Parent]; p != nil {
			made[i].ParentSpanId = p.SpanId
		}
		if a := byID[spans[i].After]; a != nil {
			made[i].Links = append(made[i].Links, &tracepb.Span_Link{TraceId: b.trace, SpanId: a.SpanId,
				Attributes: []*commonpb.KeyValue{str("durabench.edge", "after")}})
		}
	}
}
