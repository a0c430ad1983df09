package metrics

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// How a run's spans are kept.
//
// The built-in engine reports thousands of spans a run (a 256-branch
// fan-out: ~2,300), and a sweep keeps every run of a cell until the cell is
// summarised. As Spans (two strings each, 96 bytes) they were a large
// allocation per run that the collector scanned as long as the run was
// kept; on mem that alone was a tenth of a run's CPU. The Recorder keeps
// the engine's spans packed instead: 64 bytes, no pointers (the collector
// never looks inside them), the category and the name as small indexes. A
// timeline's Spans hold the rest: its driver lag and the spans reported in
// the critical path's own terms (a target's). The walk reads both.

// packedSpan is a Span as the Recorder keeps the built-in engine's: no
// pointers, 64 bytes.
type packedSpan struct {
	start, end, wait  time.Duration
	id, parent, after uint64
	stage, index      int32
	cat               uint8 // index in Categories
	name              uint8 // index in spanNames.list
}

// spanNames interns the names of the engine's spans (its span kinds and
// the world's operations: a few dozen) as indexes.
var spanNames = func() *nameTable {
	t := &nameTable{}
	index, list := map[string]uint8{}, []string{}
	add := func(name string) uint8 {
		if i, ok := index[name]; ok {
			return i
		}
		index[name] = uint8(len(list))
		list = append(list, name)
		return index[name]
	}
	add("") // 0: no name
	for k := engine.SpanStart; k <= engine.SpanBody; k++ {
		t.kinds[k] = add(k.String())
	}
	for _, op := range world.Ops() {
		add(string(op))
	}
	t.ops = make([]uint8, engine.SpanOps())
	for i := range t.ops {
		t.ops[i] = add(string(engine.SpanOp(i).Op()))
	}
	t.index.Store(&index)
	t.list.Store(&list)
	return t
}()

// nameTable is read without a lock (the Recorder looks up a name per span,
// from every engine goroutine); a name it does not know yet (an op from a
// newer worker) is added to copies of it.
type nameTable struct {
	mu    sync.Mutex // adding names
	index atomic.Pointer[map[string]uint8]
	list  atomic.Pointer[[]string]
	kinds [engine.SpanBody + 1]uint8
	// ops is each engine.SpanOp's name.
	ops []uint8
}

// maxNames bounds the names a table holds; a name past it is lost ("").
const maxNames = 256

// of returns name's index, interning it.
func (t *nameTable) of(name string) uint8 {
	if i, ok := (*t.index.Load())[name]; ok {
		return i
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	index, list := *t.index.Load(), *t.list.Load()
	if i, ok := index[name]; ok {
		return i
	}
	if len(list) >= maxNames {
		return 0
	}
	i := uint8(len(list))
	index = maps.Clone(index)
	index[name] = i
	list = append(slices.Clip(list), name)
	t.index.Store(&index)
	t.list.Store(&list)
	return i
}

// name returns the name of index i.
func (t *nameTable) name(i uint8) string {
	if list := *t.list.Load(); int(i) < len(list) {
		return list[i]
	}
	return ""
}

// engineName is the name of the engine's span s (its op for a call).
func (t *nameTable) engineName(s *engine.Span) uint8 {
	if s.Kind == engine.SpanCall {
		if int(s.Op) < len(t.ops) {
			return t.ops[s.Op]
		}
		return 0 // an op this build does not number: no name
	}
	if int(s.Kind) < len(t.kinds) && t.kinds[s.Kind] != 0 {
		return t.kinds[s.Kind]
	}
	return t.of(s.Kind.String())
}

// spanChunk is how many packed spans a chunk holds: 16 KiB, a small
// object. A run's engine spans are kept in chunks rather than in one
// slice sized for the run (a 256-branch run's: 150 KiB): a large object
// takes fresh pages from the heap for every run, and on mem the page
// faults of touching them cost more than the rest of keeping the spans.
const spanChunk = 256

// engineSpans are a run's engine spans, in chunks of spanChunk.
type engineSpans [][]packedSpan

// len is how many spans there are.
func (c engineSpans) len() int {
	if len(c) == 0 {
		return 0
	}
	return (len(c)-1)*spanChunk + len(c[len(c)-1])
}

// snapshot returns c as it stands: its own index, the last chunk's
// capacity capped (the Recorder appends to the chunks it shares).
func (c engineSpans) snapshot() engineSpans {
	if len(c) == 0 {
		return nil
	}
	out := slices.Clone(c)
	last := out[len(out)-1]
	out[len(out)-1] = last[:len(last):len(last)]
	return out
}

// addEngine packs one task's spans as the engine reports them (the task's
// own span last), as FromEngine converts them, and appends them to c.
// chunks sizes c's index the first time (0: grown as needed).
func (c *engineSpans) addEngine(spans []engine.Span, chunks int) {
	var in engine.SpanKind
	if n := len(spans); n > 0 && spans[n-1].Kind.Task() {
		in = spans[n-1].Kind
	}
	if *c == nil && chunks > 0 {
		*c = make(engineSpans, 0, chunks)
	}
	for i := range spans {
		s := &spans[i]
		kind := in
		if s.Parent == 0 {
			kind = 0
		}
		n := len(*c)
		if n == 0 || len((*c)[n-1]) == spanChunk {
			*c = append(*c, make([]packedSpan, 0, spanChunk))
			n++
		}
		(*c)[n-1] = append((*c)[n-1], packedSpan{start: s.Start, end: s.End, wait: s.Wait, id: s.ID, parent: s.Parent,
			after: s.After, stage: s.Stage, index: s.Index, cat: uint8(classify(s, kind)), name: spanNames.engineName(s)})
	}
}

// pack converts a Span (its category, by name; an unknown one is
// unattributed) with its name as index name.
func pack(s *Span, name uint8) packedSpan {
	return packedSpan{start: s.Start, end: s.End, wait: s.Wait, id: s.ID, parent: s.Parent, after: s.After,
		stage: clampInt32(s.Stage), index: clampInt32(s.Index), cat: uint8(categoryOrUnattributed(s.Category)), name: name}
}

func clampInt32(v int) int32 {
	return int32(max(min(v, 1<<31-1), -1<<31))
}

// unpack is p as a Span.
func (p *packedSpan) unpack() Span {
	return Span{Category: Categories[p.cat].Name, Name: spanNames.name(p.name), Start: p.start, End: p.end, Wait: p.wait,
		Stage: int(p.stage), Index: int(p.index), ID: p.id, Parent: p.parent, After: p.after}
}

// SpanCount is how many spans the run has: its engine's and its Spans.
func (t *RunTimeline) SpanCount() int { return t.engineSpans.len() + len(t.Spans) }

// AllSpans returns every span of the run as Spans, its engine's first (in
// the order they were reported), then its Spans.
func (t *RunTimeline) AllSpans() []Span {
	out := make([]Span, 0, t.SpanCount())
	for _, c := range t.engineSpans {
		for i := range c {
			out = append(out, c[i].unpack())
		}
	}
	return append(out, t.Spans...)
}
