package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// Where the time went: a run's critical path (DESIGN.md §12).
//
// A run's timeline holds, besides its steps, spans: intervals on the
// engine's clock, each with a category (Categories). The critical path is
// found by walking back from the run's last step end (its TTLS) along
// happens-before edges — a step's body after its delivery, a delivery
// after its publish, a publish inside the activation that made it, an
// activation after the delivery or completion that triggered it — and each
// category's exclusive time on it is that category's share of the run's
// TTLS. The segments of the path tile [t0, last step end] exactly, so one
// run's categories add up to its TTLS to the nanosecond.
//
// The walk works on a generic span list, not on engine internals: a span
// may hold other spans (Parent: a task and its calls), and may happen after
// a span elsewhere (After: a delivery's task after its queue wait, a queue
// wait after its publish). Spans without such structure — a target's spans
// of a category, an interval, a stage and index and a name — all sit at
// the top level, where the walk takes, at each point, the span that ended
// last before it.

// NumCategories is len(Categories).
const NumCategories = 11

// Span is one interval on a run's critical-path timeline, on the runtime
// clock (the driver's clock, for a target's spans).
type Span struct {
	// Category is one of Categories. For a span that holds others (a
	// task), it is the category of the task's own time outside them.
	Category string `json:"category"`
	// Name says what the span is ("step_completed", "log_load", "task"):
	// for display only.
	Name  string        `json:"name,omitempty"`
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Wait is the part of the span, from Start, spent waiting for backend
	// capacity: it counts as contention, the rest as Category.
	Wait time.Duration `json:"wait,omitempty"`
	// Stage and Index name the step the span is about (-1: none).
	Stage int `json:"stage"`
	Index int `json:"index"`
	// ID identifies the span in its run (0: nothing refers to it); Parent
	// is the span holding it (0: none, the top level); After is the span
	// it happens after, elsewhere (0: none known).
	ID     uint64 `json:"id,omitempty"`
	Parent uint64 `json:"parent,omitempty"`
	After  uint64 `json:"after,omitempty"`
}

// PathSegment is one interval of a run's critical path: the category its
// time counts in and the span it came from.
type PathSegment struct {
	Category string `json:"category"`
	// Start and End are on the runtime clock, in nanoseconds.
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Span is the ID of the span the segment is a part of (0: none, e.g.
	// unattributed time between spans); Name is that span's name and
	// Step its step ("stage.index"), if any.
	Span uint64 `json:"span,omitempty"`
	Name string `json:"name,omitempty"`
	Step string `json:"step,omitempty"`
}

// PathTotals are a run's exclusive time per category on its critical path,
// indexed like Categories.
type PathTotals [NumCategories]time.Duration

// Sum is the total of every category: the run's TTLS.
func (p PathTotals) Sum() time.Duration {
	var s time.Duration
	for _, d := range p {
		s += d
	}
	return s
}

// Totals adds up the segments' time per category.
func Totals(segs []PathSegment) PathTotals {
	var p PathTotals
	for _, s := range segs {
		i, ok := categoryIndex[s.Category]
		if !ok {
			i = categoryIndex[CatUnattributed]
		}
		p[i] += s.End - s.Start
	}
	return p
}

// Micros converts p to whole microseconds that add up exactly to total
// (the run's TTLS sample in µs, the truncation of p's sum): each category
// gets its truncated microseconds, and the microseconds the truncation
// lost go one each to the categories with the largest remainders (ties:
// report order) — the largest-remainder method, so no category moves by a
// microsecond or more. A total that is not p's sum is met anyway: the
// excess goes to unattributed, a shortfall is taken from unattributed
// first, then in report order. Negative values count as 0.
func (p PathTotals) Micros(total int64) [NumCategories]int64 {
	var out [NumCategories]int64
	var rem [NumCategories]time.Duration
	var sum int64
	for i, d := range p {
		d = max(d, 0)
		out[i], rem[i] = int64(d/time.Microsecond), d%time.Microsecond
		sum += out[i]
	}
	total = max(total, 0)
	order := make([]int, NumCategories)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for _, i := range order {
		if sum >= total || rem[i] == 0 {
			break
		}
		out[i]++
		sum++
	}
	un := categoryIndex[CatUnattributed]
	out[un] += max(total-sum, 0)
	sum = max(sum, total)
	for _, i := range append([]int{un}, order...) {
		take := min(out[i], sum-total)
		out[i] -= take
		sum -= take
	}
	return out
}

// CriticalPath walks spans back from end to t0 and returns the critical
// path's segments in time order; they tile [t0, end] exactly. from is the
// ID of the span to start in (the task that ran the run's last step); 0
// starts at the top level.
//
// The walk keeps a cursor, starting at end, inside a container (a span
// holding others, or the top level). In a container it takes the child
// that ended last at or before the cursor (the one the container was
// waiting for); the time between that child's end and the cursor is the
// container's own (a task's: compute; the top level's: unattributed). A
// child that holds others is walked into; any other is attributed whole
// (its Wait as contention, the rest as its category) and the cursor moves
// to its start. When the cursor reaches a container's start, or a span
// that happens after another (After) has been attributed, the walk follows
// After to that span, across containers (the time between the two, if
// any, is unattributed), else it goes on in the enclosing container. At
// the top level with nothing left, the rest down to t0 is unattributed.
func CriticalPath(spans []Span, t0, end time.Duration, from uint64) []PathSegment {
	return criticalPath(nil, spans, t0, end, from)
}

// PathTotalsOf is Totals(CriticalPath(spans, t0, end, from)), found
// without building the path's segments: what a cell's summary needs.
func PathTotalsOf(spans []Span, t0, end time.Duration, from uint64) PathTotals {
	return pathTotals(nil, spans, t0, end, from)
}

// criticalPath is CriticalPath over a run's engine spans and its Spans.
func criticalPath(es engineSpans, spans []Span, t0, end time.Duration, from uint64) []PathSegment {
	if end <= t0 {
		return nil
	}
	w := newWalk(es, spans, t0, false)
	defer w.release()
	w.run(end, from)
	segs := slices.Clone(w.segs)
	slices.Reverse(segs)
	return segs
}

// pathTotals is PathTotalsOf over a run's engine spans and its Spans.
func pathTotals(es engineSpans, spans []Span, t0, end time.Duration, from uint64) PathTotals {
	if end <= t0 {
		return PathTotals{}
	}
	w := newWalk(es, spans, t0, true)
	defer w.release()
	w.run(end, from)
	return w.totals
}

const top = -1 // the top-level container

type walk struct {
	// spans are the engine's spans, then the others (generic), packed.
	spans   []packedSpan
	generic []Span
	t0      time.Duration
	byID    idIndex
	// kids[from[k+1]:from[k+2]] are container k's children (k = top:
	// -1), sorted by End, Start and position the first time the walk
	// enters k (sorted[k+1]).
	kids    []int32
	from    []int32
	sorted  []bool
	visited []bool
	// in (each span's container + 1) and next are newWalk's scratch.
	in, next []int32
	// onlyTotals: the walk adds up totals and builds no segments.
	onlyTotals bool
	totals     PathTotals
	segs       []PathSegment // backwards
}

// walks keeps the last walk's scratch for the next: a cell's summary walks
// every run's spans, thousands each, with the same buffers. (Not a
// sync.Pool: a collection empties it, and a sweep collects between two
// walks about as often as not.)
var walks struct {
	sync.Mutex
	w *walk
}

// maxKeptWalk bounds the spans a walk's scratch is kept for (~100 bytes
// each).
const maxKeptWalk = 1 << 16

func newWalk(es engineSpans, generic []Span, t0 time.Duration, onlyTotals bool) *walk {
	walks.Lock()
	w := walks.w
	walks.w = nil
	walks.Unlock()
	if w == nil {
		w = new(walk)
	}
	w.spans = w.spans[:0]
	for _, c := range es {
		w.spans = append(w.spans, c...)
	}
	for i := range generic {
		w.spans = append(w.spans, pack(&generic[i], 0))
	}
	spans, n := w.spans, len(w.spans)
	w.generic, w.t0, w.onlyTotals, w.totals = generic, t0, onlyTotals, PathTotals{}
	w.segs = w.segs[:0]
	w.visited = resize(w.visited, n)
	w.from = resize(w.from, n+2)
	w.sorted = resize(w.sorted, n+1)
	w.in = resize(w.in, n)
	w.byID.reset(n)
	// A span reported twice (a task still running when its run finished
	// reports itself then, and again when it ends) is its last report.
	for i := range spans {
		if id := spans[i].id; id != 0 {
			w.byID.put(id, int32(i))
		}
	}
	// Children grouped by container with a counting sort: each container's
	// are sorted only if the walk enters it.
	in := w.in
	for i := range spans {
		if id := spans[i].id; id != 0 && w.byID.get(id) != i {
			w.visited[i] = true // superseded
			in[i] = -1
			continue
		}
		in[i] = int32(w.containerOf(i) + 1)
		w.from[in[i]+1]++
	}
	for k := 1; k < len(w.from); k++ {
		w.from[k] += w.from[k-1]
	}
	w.kids = resize(w.kids, int(w.from[n+1]))
	w.next = append(w.next[:0], w.from[:n+1]...)
	next := w.next
	for i, k := range in {
		if k >= 0 {
			w.kids[next[k]] = int32(i)
			next[k]++
		}
	}
	return w
}

// release returns w's scratch for the next walk.
func (w *walk) release() {
	w.generic = nil
	if cap(w.spans) > maxKeptWalk {
		return
	}
	walks.Lock()
	walks.w = w
	walks.Unlock()
}

// resize returns s with length n, every element zero, reusing its array
// when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// idIndex maps span IDs (never 0) to their positions: an open-addressing
// table, reused from walk to walk (a map of thousands of IDs per run costs
// more than the rest of the walk).
type idIndex struct {
	keys  []uint64
	vals  []int32
	shift uint
}

func (x *idIndex) reset(n int) {
	size, shift := 16, uint(64-4)
	for size < 2*n {
		size, shift = size*2, shift-1
	}
	x.keys, x.vals, x.shift = resize(x.keys, size), resize(x.vals, size), shift
}

func (x *idIndex) slot(id uint64) uint64 { return (id * 0x9e3779b97f4a7c15) >> x.shift }

// put maps id to i (a later put of the same id wins).
func (x *idIndex) put(id uint64, i int32) {
	mask := uint64(len(x.keys) - 1)
	for j := x.slot(id); ; j = (j + 1) & mask {
		if k := x.keys[j]; k == 0 || k == id {
			x.keys[j], x.vals[j] = id, i
			return
		}
	}
}

// get returns id's position, -1 when it has none (and for id 0).
func (x *idIndex) get(id uint64) int {
	if id == 0 {
		return -1
	}
	mask := uint64(len(x.keys) - 1)
	for j := x.slot(id); ; j = (j + 1) & mask {
		switch x.keys[j] {
		case id:
			return int(x.vals[j])
		case 0:
			return -1
		}
	}
}

// children are container k's children, by End, Start and position.
func (w *walk) children(k int) []int32 {
	kids := w.kids[w.from[k+1]:w.from[k+2]]
	if !w.sorted[k+1] {
		w.sorted[k+1] = true
		slices.SortFunc(kids, func(a, b int32) int {
			sa, sb := &w.spans[a], &w.spans[b]
			return cmp.Or(cmp.Compare(sa.end, sb.end), cmp.Compare(sa.start, sb.start), cmp.Compare(a, b))
		})
	}
	return kids
}

// containerOf is the container of span i: its parent, or the top level.
func (w *walk) containerOf(i int) int {
	if j := w.byID.get(w.spans[i].parent); j >= 0 && j != i {
		return j
	}
	return top
}

func (w *walk) holds(i int) bool { return i != top && w.from[i+2] > w.from[i+1] }

// pick returns the unvisited child of k that ended last at or before t.
func (w *walk) pick(k int, t time.Duration) int {
	kids := w.children(k)
	j, _ := slices.BinarySearchFunc(kids, t, func(i int32, t time.Duration) int {
		if w.spans[i].end <= t {
			return -1
		}
		return 1
	})
	for j--; j >= 0; j-- {
		if !w.visited[kids[j]] {
			return int(kids[j])
		}
	}
	return -1
}

// name is span i's name.
func (w *walk) name(i int) string {
	if g := i - (len(w.spans) - len(w.generic)); g >= 0 {
		return w.generic[g].Name
	}
	return spanNames.name(w.spans[i].name)
}

// add records [s, e) as category cat, from span i (top: none); clipped at
// t0.
func (w *walk) add(cat uint8, s, e time.Duration, i int) {
	s = max(s, w.t0)
	if e <= s {
		return
	}
	if w.onlyTotals {
		w.totals[cat] += e - s
		return
	}
	seg := PathSegment{Category: Categories[cat].Name, Start: s, End: e}
	if i != top {
		sp := &w.spans[i]
		seg.Span, seg.Name = sp.id, w.name(i)
		if sp.stage >= 0 {
			seg.Step = strconv.Itoa(int(sp.stage)) + "." + strconv.Itoa(max(int(sp.index), 0))
		}
	}
	if n := len(w.segs); n > 0 {
		if last := &w.segs[n-1]; last.Start == e && last.Category == seg.Category && last.Span == seg.Span {
			last.Start = s
			return
		}
	}
	w.segs = append(w.segs, seg)
}

// categoryOrUnattributed is cat's index in Categories; unattributed's for
// a name that is none (as Totals counts it). A switch: a map lookup hashes
// the name.
func categoryOrUnattributed(cat string) int {
	switch cat {
	case CatDriverLag:
		return catDriverLag
	case CatStart:
		return catStart
	case CatQueueWait:
		return catQueueWait
	case CatLogLoad:
		return catLogLoad
	case CatWrite:
		return catWrite
	case CatPublish:
		return catPublish
	case CatRunRead:
		return catRunRead
	case CatCompute:
		return catCompute
	case CatBody:
		return catBody
	case CatContention:
		return catContention
	}
	return catUnattributed // or a name that is no category
}

// self is the category of container k's own time.
func (w *walk) self(k int) uint8 {
	if k == top {
		return catUnattributed
	}
	return w.spans[k].cat
}

// leaf attributes span i from its start to t and returns its start.
func (w *walk) leaf(i int, t time.Duration) time.Duration {
	sp := &w.spans[i]
	if sp.start >= t {
		return t
	}
	split := min(sp.start+max(sp.wait, 0), t)
	w.add(sp.cat, split, t, i)
	w.add(catContention, sp.start, split, i)
	return sp.start
}

// run walks back from end; the path is in w.segs, backwards (or in
// w.totals).
func (w *walk) run(end time.Duration, from uint64) {
	k := top
	if i := w.byID.get(from); i >= 0 {
		k = i
		w.visited[i] = true
	}
	t := end
	// Every step marks a span visited or leaves a container for good;
	// the bound only guards against malformed structure (parent cycles).
	for steps := 4*len(w.spans) + 16; t > w.t0; steps-- {
		if steps <= 0 {
			w.add(catUnattributed, w.t0, t, top)
			break
		}
		var x int // the span just attributed, whose After the walk follows
		if c := w.pick(k, t); c >= 0 {
			w.visited[c] = true
			w.add(w.self(k), w.spans[c].end, t, k)
			t = min(t, w.spans[c].end)
			if w.holds(c) {
				k = c
				continue
			}
			t, x = w.leaf(c, t), c
		} else {
			if k == top {
				w.add(catUnattributed, w.t0, t, top)
				break
			}
			if s := w.spans[k].start; s < t {
				w.add(w.self(k), s, t, k)
				t = s
			}
			x = k
		}
		// Follow happens-after edges from x.
		for {
			a := w.byID.get(w.spans[x].after)
			if a < 0 || w.visited[a] || w.spans[a].start > t {
				k = w.containerOf(x)
				break
			}
			w.visited[a] = true
			e := min(w.spans[a].end, t)
			w.add(catUnattributed, e, t, top)
			t = e
			if w.holds(a) {
				k = a
				break
			}
			t, x = w.leaf(a, t), a
		}
	}
}

// RunPath is the critical path of a finished run from t0 to its last step
// end; ok is false for a run that failed, did not finish or ran no step.
// The walk starts in the task whose step ended last (found by its body
// span: the same step, started when that execution started), else at the
// top level.
func RunPath(t *RunTimeline) (segs []PathSegment, ok bool) {
	end, from, ok := t.pathStart()
	if !ok {
		return nil, false
	}
	return criticalPath(t.engineSpans, t.Spans, t.T0, end, from), true
}

// RunPathTotals is Totals of RunPath's path, found without its segments.
func RunPathTotals(t *RunTimeline) (PathTotals, bool) {
	end, from, ok := t.pathStart()
	if !ok {
		return PathTotals{}, false
	}
	return pathTotals(t.engineSpans, t.Spans, t.T0, end, from), true
}

// RunCompletionPath is the critical path of a finished run from t0 to its
// terminal event (Done: its TTC), as RunPath's is to its last step end;
// ok is false for a run that failed or did not finish. The walk starts at
// the write of the terminal event (completionStart), else at the top
// level. Where a run is recorded done well after its last step, this path
// shows where that time went.
func RunCompletionPath(t *RunTimeline) (segs []PathSegment, ok bool) {
	from, ok := t.completionStart()
	if !ok {
		return nil, false
	}
	return criticalPath(t.engineSpans, t.Spans, t.T0, t.Done, from), true
}

// RunCompletionPathTotals is Totals of RunCompletionPath's path, found
// without its segments.
func RunCompletionPathTotals(t *RunTimeline) (PathTotals, bool) {
	from, ok := t.completionStart()
	if !ok {
		return PathTotals{}, false
	}
	return pathTotals(t.engineSpans, t.Spans, t.T0, t.Done, from), true
}

// terminalWrite names the span of a run's terminal event's write: the
// built-in engine's append of run_completed, or a target's span whose
// name ends in it (the Workflow SDK's "world.events.create run_completed").
var terminalWrite = string(world.AppendOp(world.RunCompleted))

func isTerminalWrite(name string) bool {
	return name == terminalWrite || strings.HasSuffix(name, " "+terminalWrite)
}

// completionStart is where a run's path to completion starts: in the task
// of the terminal write that ended last by Done (the built-in engine's
// terminal event is that write's end); else, when every terminal write
// ended after Done (an engine that stamps the event as its write starts:
// the Workflow SDK, whose stamp and span start are a fraction of a
// millisecond apart either way), at the write that started closest to
// Done — inside it, so that its part up to Done, if any, is the path's
// last segment; else (0) at the top level.
func (t *RunTimeline) completionStart() (from uint64, ok bool) {
	if !t.Finished || t.Failed {
		return 0, false
	}
	ended, gap := time.Duration(-1), time.Duration(-1)
	var fromEnded, fromLater uint64
	visit := func(start, end time.Duration, id, parent uint64) {
		switch d := max(start-t.Done, t.Done-start); {
		case end <= t.Done:
			if end > ended {
				ended, fromEnded = end, parent
			}
		case id != 0 && (gap < 0 || d < gap):
			gap, fromLater = d, id
		}
	}
	for _, c := range t.engineSpans {
		for i := range c {
			if sp := &c[i]; sp.cat == catWrite && isTerminalWrite(spanNames.name(sp.name)) {
				visit(sp.start, sp.end, sp.id, sp.parent)
			}
		}
	}
	for i := range t.Spans {
		if sp := &t.Spans[i]; sp.Category == CatWrite && isTerminalWrite(sp.Name) {
			visit(sp.Start, sp.End, sp.ID, sp.Parent)
		}
	}
	if ended >= 0 {
		return fromEnded, true
	}
	return fromLater, true
}

// pathStart is where a run's critical path starts: its last step end and
// the task that ran that step (0: none known).
func (t *RunTimeline) pathStart() (end time.Duration, from uint64, ok bool) {
	if !t.Finished || t.Failed || len(t.Steps) == 0 {
		return 0, 0, false
	}
	last := t.Steps[0]
	for _, s := range t.Steps[1:] {
		if s.End > last.End {
			last = s
		}
	}
	for _, c := range t.engineSpans {
		for i := range c {
			sp := &c[i]
			if sp.cat == catBody && int(sp.stage) == last.Stage && int(sp.index) == last.Index && sp.start == last.Start {
				return last.End, sp.parent, true
			}
		}
	}
	for i := range t.Spans {
		sp := &t.Spans[i]
		if sp.Category == CatBody && sp.Stage == last.Stage && sp.Index == last.Index && sp.Start == last.Start {
			return last.End, sp.Parent, true
		}
	}
	return last.End, 0, true
}

// HasEngineSpans reports whether the run has spans other than its driver
// lag: whether its engine reported where its time went.
func (t *RunTimeline) HasEngineSpans() bool {
	if len(t.engineSpans) > 0 {
		return true
	}
	for i := range t.Spans {
		if t.Spans[i].Category != CatDriverLag {
			return true
		}
	}
	return false
}

// Classify is the category of the built-in engine's span s; in is the
// kind of the task it ran in (0: none). A call made by a run's start is
// the start's.
func Classify(s engine.Span, in engine.SpanKind) string {
	return Categories[classify(&s, in)].Name
}

// classify is Classify's index in Categories.
func classify(s *engine.Span, in engine.SpanKind) int {
	switch s.Kind {
	case engine.SpanStart:
		return catStart
	case engine.SpanTask, engine.SpanResume:
		return catCompute
	case engine.SpanQueue:
		return catQueueWait
	case engine.SpanBody:
		return catBody
	case engine.SpanCall:
		if in == engine.SpanStart {
			return catStart
		}
		return int(opCategories[s.Op])
	}
	return catUnattributed
}

// opCategories is the category of a call, by its op (a call made by a
// run's start aside): looked up, not compared name by name.
var opCategories = func() []uint8 {
	cats := make([]uint8, engine.SpanOps())
	for i := range cats {
		cats[i] = uint8(opCategory(engine.SpanOp(i).Op()))
	}
	return cats
}()

// opCategory is the category of a call of op.
func opCategory(op world.Op) int {
	switch op {
	case world.OpLoad:
		return catLogLoad
	case world.OpPublish:
		return catPublish
	case world.OpGetRun, world.OpHookRun, world.OpListRuns:
		return catRunRead
	case world.OpCreateRun:
		return catStart
	case "", world.OpDeliver, world.OpWriteChunk, world.OpReadChunks, world.OpCloseStream:
		return catUnattributed // not a call the engine times, or one this build does not know
	}
	return catWrite // an append, named by its event kind
}

// FromEngine converts one task's spans as the engine reports them (the
// task's own span last) and appends them to dst.
func FromEngine(dst []Span, spans []engine.Span) []Span {
	var in engine.SpanKind
	if n := len(spans); n > 0 && spans[n-1].Kind.Task() {
		in = spans[n-1].Kind
	}
	for _, s := range spans {
		kind := in
		if s.Parent == 0 {
			kind = 0
		}
		name := string(s.Op.Op())
		if s.Kind != engine.SpanCall {
			name = s.Kind.String()
		}
		dst = append(dst, Span{Category: Classify(s, kind), Name: name, Start: s.Start, End: s.End, Wait: s.Wait,
			Stage: int(s.Stage), Index: int(s.Index), ID: s.ID, Parent: s.Parent, After: s.After})
	}
	return dst
}
