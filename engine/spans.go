package engine

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durabench/durabench/world"
)

// Spans: where a run's time went.
//
// Besides its step executions, the engine can report every interval it
// spends on a run, timed with the world's Runtime clock (virtual on sim),
// so that a run's time to last step can be split along its critical path
// (metrics.CriticalPath, DESIGN.md §12). An observer that implements
// SpanObserver receives them; any other observer costs nothing: the
// engine then neither wraps its world nor reads the clock more.
//
// The engine's work on a run happens in tasks: the run's start
// (StartRun), the handling of one queue delivery (an orchestrator
// activation or a step consumer, with the inline steps and the inline
// continuation it runs), and a hook resume. A task's spans are its world
// calls (each with its wait for backend capacity, when the world reports
// it), its step bodies and, for a delivery, the message's wait in the
// queue. The task's own span covers it from start to end; its time outside
// every span under it is the engine's own work — replaying the log,
// deciding what to dispatch, decoding. Happens-before edges between tasks
// are explicit: a delivery's task follows its queue span (After), which
// follows the publish call that enqueued the message (After).

// SpanKind is what a Span is.
type SpanKind uint8

// Span kinds.
const (
	// SpanStart is a run's start: StartRun creating the run and publishing
	// its first orchestrator message (a task).
	SpanStart SpanKind = iota + 1
	// SpanTask is the handling of one queue delivery (a task): an
	// orchestrator activation, or a step consumer with the continuation
	// it may run.
	SpanTask
	// SpanResume is a hook resume (ResumeHook, called by the driver): a
	// task.
	SpanResume
	// SpanCall is one world call of a task; Op names it.
	SpanCall
	// SpanQueue is a message's wait in the queue: from its publish
	// returning to its delivery's handler starting (Op is deliver). For
	// a redelivery it runs from the first publish, so a delivery that
	// waited for a visibility timeout shows it.
	SpanQueue
	// SpanBody is a step body.
	SpanBody
)

var spanKindNames = [...]string{SpanStart: "start", SpanTask: "task", SpanResume: "resume",
	SpanCall: "call", SpanQueue: "queue", SpanBody: "body"}

func (k SpanKind) String() string {
	if int(k) < len(spanKindNames) && spanKindNames[k] != "" {
		return spanKindNames[k]
	}
	return "unknown"
}

// Task reports whether spans of kind k are tasks (they hold other spans).
func (k SpanKind) Task() bool { return k == SpanStart || k == SpanTask || k == SpanResume }

// SpanOp is a world operation as a small number, so that a Span holds no
// pointer: a run's thousands of spans are then memory the collector never
// scans, and recording one writes no pointer (no write barrier). It is the
// operation's place in world.Ops, from 1; 0 is none (and an operation this
// build does not know).
type SpanOp uint8

// spanOps lists the world's operations, as SpanOp numbers them.
var spanOps = append([]world.Op{""}, world.Ops()...)

var spanOpOf = func() map[world.Op]SpanOp {
	m := make(map[world.Op]SpanOp, len(spanOps))
	for i, op := range spanOps[1:] {
		m[op] = SpanOp(i + 1)
	}
	return m
}()

// OpOf is op's SpanOp (0 for an operation this build does not know).
func OpOf(op world.Op) SpanOp { return spanOpOf[op] }

// Op is the world operation o numbers ("" for 0).
func (o SpanOp) Op() world.Op {
	if int(o) < len(spanOps) {
		return spanOps[o]
	}
	return ""
}

// SpanOps is how many SpanOp numbers there are (0 included).
func SpanOps() int { return len(spanOps) }

// The SpanOps the engine records, looked up once.
var (
	opCreateRun = OpOf(world.OpCreateRun)
	opGetRun    = OpOf(world.OpGetRun)
	opLoad      = OpOf(world.OpLoad)
	opPublish   = OpOf(world.OpPublish)
	opDeliver   = OpOf(world.OpDeliver)
	opHookRun   = OpOf(world.OpHookRun)
	// opAppend is each event kind's append.
	opAppend = func() (a [256]SpanOp) {
		for k := range a {
			a[k] = OpOf(world.AppendOp(world.EventKind(k)))
		}
		return a
	}()
)

// Span is one interval the engine spent on a run. It holds no pointer.
type Span struct {
	Kind SpanKind
	// Op is the world operation of a SpanCall (an append's event kind,
	// log_load, publish, run_get, ...), deliver for a SpanQueue.
	Op SpanOp
	// Stage and Index name the step the span is about (a step event's
	// append, a step message's publish or delivery, a body); -1 when it
	// is about none.
	Stage, Index int32
	// Start and End are on the world's Runtime clock.
	Start, End time.Duration
	// Wait is the part of the span, from its Start, spent waiting for
	// backend capacity (a profile's capacity limit) rather than being
	// served: for a call, its wait for a permit; for a queue span, its
	// delivery's. 0 when the world reports none.
	Wait time.Duration
	// ID identifies the span within the engine (never 0); Parent is the
	// task it ran in (0 for tasks and queue spans); After is the span it
	// happens after, across tasks: a delivery's task is after its queue
	// span, a queue span after the publish call (0: none known).
	ID, Parent, After uint64
}

// SpanObserver is an Observer that also receives spans. The engine checks
// for it once, in New.
type SpanObserver interface {
	Observer
	// Spans reports a task's spans when the task ends, its own span last.
	// A task still running when its run finishes reports what it has so
	// far just before RunFinished, its own span (ending with its latest
	// span) last, and the rest when it ends: a span reported twice is its
	// later report. The slice is the observer's: the engine never touches
	// it again, so an observer may keep it as it is (the Recorder keeps
	// it until the run's timeline is read, and does its work there, off
	// the run's path).
	Spans(run string, spans []Span)
}

// cacheLinePad keeps the fields on either side of it off one cache line
// (64 bytes on amd64 and arm64): a counter that both cores write, next to
// fields every call reads, makes each of those reads miss.
type cacheLinePad struct{ _ [64]byte }

// spanRec records spans for a SpanObserver. A nil *spanRec records
// nothing, and every method is a no-op on it.
type spanRec struct {
	obs SpanObserver
	rt  world.Runtime
	// waits: the world reports each call's wait for capacity.
	waits bool
	// ids, written by every task's start from both cores, sits on a cache
	// line of its own: on the line of rt and waits, which every timed
	// call reads, it made each of those reads miss after another core's
	// task started.
	_   cacheLinePad
	ids atomic.Uint64
	_   cacheLinePad
	// runs holds, per run until it finishes, its tasks in progress and
	// when each of its messages' first successful publish returned.
	runs sync.Map // run -> *runSpans
}

// taskBuf is how many spans a task's buffer holds before it grows: a
// delivery's task records about five.
const taskBuf = 8

// runSpans is what the recorder keeps about a run until it finishes.
type runSpans struct {
	// steps notes the first publish of each step's message, by the
	// step's ordinal in the run (base[stage] + index): taken and read
	// with atomics, no lock and no hashing, by the publisher and the
	// consumer of every step. Empty when the run's program is not known
	// here (a run another engine started): its notes are then in pubs.
	steps []stepNote
	base  []int
	mu    sync.Mutex // short critical sections, never held across a wait
	// pubs notes the first publish of every other message
	// (notes[pubs[msg]]): a map to an index, so that completing a note
	// does not hash the ID again.
	pubs  map[string]int32
	notes []published
	// tasks lists every task of the run since it started (linked through
	// their inRun, newest first), in progress or ended: a task joins it
	// with a compare-and-swap and never leaves, so that starting and
	// ending a task takes no lock of the run; finished skips the ended.
	// It sits on a cache line of its own: every task's start writes it,
	// from both cores, and every publish and delivery reads steps and
	// base.
	_     cacheLinePad
	tasks atomic.Pointer[spanTask]
	_     cacheLinePad
}

type published struct {
	end  time.Duration
	span uint64
}

// stepNote is a step message's first publish: its span's ID (0: none
// yet) and when the call returned, plus one (0: not yet).
type stepNote struct {
	span atomic.Uint64
	end  atomic.Int64
}

// stepNote returns the note of step (stage, index)'s message, or nil when
// the run has none for it.
func (rs *runSpans) stepNote(stage, index int) *stepNote {
	if stage < 0 || stage >= len(rs.base) || index < 0 {
		return nil
	}
	next := len(rs.steps)
	if stage+1 < len(rs.base) {
		next = rs.base[stage+1]
	}
	if i := rs.base[stage] + index; i < next {
		return &rs.steps[i]
	}
	return nil
}

func newSpanRec(obs Observer, w world.World) *spanRec {
	so, ok := obs.(SpanObserver)
	if !ok {
		return nil
	}
	return &spanRec{obs: so, rt: w.Runtime(), waits: w.Capabilities().CapacityWaits}
}

// block returns the first ID of a fresh block of spanBlock IDs (never 0).
func (r *spanRec) block() uint64 { return r.ids.Add(1) * spanBlock }

// spanTask is one task of a run, collecting its spans until it ends. It is
// also the context the task runs in (its parent's, carrying the task), so
// that a task costs one allocation, not two.
type spanTask struct {
	context.Context
	rec  *spanRec
	self Span
	mu   sync.Mutex // short critical sections, never held across a wait
	run  string
	rs   *runSpans // run's, once it is known
	buf  []Span    // handed to the observer when the task ends
	// next is the ID of the task's next span: its spans are numbered
	// after its own, in a block of spanBlock IDs.
	next uint64
	// last is the latest end among the task's spans: the task's own span
	// ends there (the clock is not read again for it).
	last time.Duration
	// inRun links the task into its run's tasks (runSpans.tasks); ended
	// is set when it ends (under mu; read without it by finished and by
	// a call slot's writer).
	inRun *spanTask
	ended atomic.Bool
	// slots, when set (reserveCalls), take the calls of the goroutines
	// the task starts at once, each in a slot of its own.
	slots *callSlots
}

// spanBlock is how many span IDs a task takes at once: task IDs are
// multiples of it, so a task numbers its spans without an atomic.
const spanBlock = 1 << 20

type taskKey struct{}

// Value returns the task for taskKey, else the parent context's value.
func (t *spanTask) Value(key any) any {
	if key == (taskKey{}) {
		return t
	}
	return t.Context.Value(key)
}

// taskOf returns the task ctx runs in, or nil.
func taskOf(ctx context.Context) *spanTask {
	if t, ok := ctx.(*spanTask); ok {
		return t
	}
	t, _ := ctx.Value(taskKey{}).(*spanTask)
	return t
}

// begin starts a task of kind for run (which may be set later, setRun);
// the task is the context to run it with.
func (r *spanRec) begin(ctx context.Context, kind SpanKind, run string) (context.Context, *spanTask) {
	if r == nil {
		return ctx, nil
	}
	t := r.newTask(ctx, kind, r.rt.Now())
	t.setRun(run)
	return t, t
}

// newTask returns a task of kind started at at, of no run yet (setRun).
func (r *spanRec) newTask(ctx context.Context, kind SpanKind, at time.Duration) *spanTask {
	id := r.block()
	return &spanTask{Context: ctx, rec: r, buf: make([]Span, 0, taskBuf), next: id + 1,
		self: Span{Kind: kind, Start: at, Stage: -1, Index: -1, ID: id}}
}

// runOf returns what the recorder keeps about run until it finishes.
func (r *spanRec) runOf(run string) *runSpans {
	if v, ok := r.runs.Load(run); ok {
		return v.(*runSpans)
	}
	v, _ := r.runs.LoadOrStore(run, &runSpans{pubs: map[string]int32{}})
	return v.(*runSpans)
}

// expect prepares what the recorder keeps about run, before it starts,
// for its program: a note for each step's message.
func (r *spanRec) expect(run string, p *programInfo) {
	if r == nil {
		return
	}
	r.runs.LoadOrStore(run, &runSpans{steps: make([]stepNote, p.StepCount()), base: p.seqBase,
		pubs: make(map[string]int32, 8), notes: make([]published, 0, 8)})
}

// setRun names the task's run once it is known (a hook resume learns it
// from the hook) and registers the task as in progress in it; a task is
// named once.
func (t *spanTask) setRun(run string) {
	if t == nil || run == "" {
		return
	}
	rs := t.rec.runOf(run)
	t.mu.Lock()
	if t.rs != nil { // named already: it is in a run's list
		t.mu.Unlock()
		return
	}
	t.run, t.rs = run, rs
	t.mu.Unlock()
	rs.join(t)
}

// join adds t to the run's tasks.
func (rs *runSpans) join(t *spanTask) {
	for {
		head := rs.tasks.Load()
		t.inRun = head
		if rs.tasks.CompareAndSwap(head, t) {
			return
		}
	}
}

// nextID numbers the task's next span; t.mu is held.
func (t *spanTask) nextID() uint64 {
	if t.next%spanBlock == 0 {
		t.next = t.rec.block() // a task of a million spans: a fresh block
	}
	t.next++
	return t.next - 1
}

// add records s as a span of the task, its Parent and (unless reserved)
// its ID set. After the task ended (nothing the engine does today), s is
// reported on its own.
func (t *spanTask) add(s *Span) {
	s.Parent = t.self.ID
	if sl := t.slots; sl != nil && s.Kind == SpanCall && sl.put(t, s) {
		return
	}
	t.addLocked(s)
}

// addLocked is add under the task's lock.
func (t *spanTask) addLocked(s *Span) {
	t.mu.Lock()
	if s.ID == 0 {
		s.ID = t.nextID()
	}
	t.last = max(t.last, s.End)
	if !t.ended.Load() {
		t.buf = append(t.buf, *s)
		t.mu.Unlock()
		return
	}
	run := t.run
	t.mu.Unlock()
	if run != "" {
		t.rec.obs.Spans(run, []Span{*s})
	}
}

// callSlots hold the calls of goroutines a task starts at once — a
// fan-out's dispatch creates and publishes each step from a goroutine of
// its own — each call in a slot of its own, taken with an atomic add when
// the call returns (so the slots keep the order the calls ended in, as the
// task's buffer does): no lock is shared by the goroutines, and no buffer
// they share grows under them (a lock and a buffer shared by 512 calls
// from both cores cost about 4% of a 256-branch run's TTLS on mem). A
// slot's span is written whole and then its ID, atomically: a span whose
// ID reads 0 is not there yet, or was taken into the task's buffer (a
// slot is written once).
type callSlots struct {
	spans []Span
	// base is slot 0's span ID: a call that has none yet gets its slot's,
	// base + i. The IDs after the slots' (base + len + j) are those taken
	// before a call (a publish's, reserve: ids counts them).
	base uint64
	// released is set once the task took the slots back (releaseCalls).
	released atomic.Bool
	// taken and ids, added to by every call from both cores, sit on cache
	// lines of their own, apart from what every call reads above.
	_     cacheLinePad
	taken atomic.Int64
	_     cacheLinePad
	ids   atomic.Int64
	_     cacheLinePad
}

// maxSlots bounds the slots a task reserves at once: more calls than
// that take the task's lock.
const maxSlots = 1 << 16

// reserveCalls gives the task ctx runs in n slots for the calls of the
// goroutines it is about to start (a no-op without spans, or for more
// than maxSlots); releaseCalls takes them back once they returned. The
// calls past the n are recorded as any other.
func (r *spanRec) reserveCalls(ctx context.Context, n int) {
	if r == nil || n <= 1 || n > maxSlots {
		return
	}
	t := taskOf(ctx)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.Load() || t.slots != nil {
		return
	}
	if t.next%spanBlock+2*uint64(n) >= spanBlock {
		t.next = t.rec.block() + 1
	}
	t.slots = &callSlots{spans: make([]Span, n), base: t.next}
	t.next += 2 * uint64(n)
}

// releaseCalls ends the slots of the task ctx runs in, once the
// goroutines they were reserved for returned: their calls join the
// task's buffer, and its later calls are recorded there.
func (r *spanRec) releaseCalls(ctx context.Context) {
	if r == nil {
		return
	}
	t := taskOf(ctx)
	if t == nil {
		return
	}
	t.mu.Lock()
	if sl := t.slots; sl != nil {
		sl.released.Store(true) // before the slots are read: see put
		t.takeSlots()
		t.slots = nil
	}
	t.mu.Unlock()
}

// reserve takes a span ID for a call before it is made (a publish's), or
// 0 when the slots' IDs are all taken.
func (sl *callSlots) reserve() uint64 {
	j := sl.ids.Add(1) - 1
	if j >= int64(len(sl.spans)) {
		return 0
	}
	return sl.base + uint64(len(sl.spans)) + uint64(j)
}

// put writes s, a call of t that returned, in a free slot, its ID set
// unless it has one. It returns false when every slot is taken (the
// caller records s as usual).
func (sl *callSlots) put(t *spanTask, s *Span) bool {
	i := sl.taken.Add(1) - 1
	if i >= int64(len(sl.spans)) {
		return false
	}
	if s.ID == 0 {
		s.ID = sl.base + uint64(i)
	}
	// Every field but the ID, then the ID: a flush may be reading it.
	slot := &sl.spans[i]
	slot.Kind, slot.Op, slot.Stage, slot.Index = s.Kind, s.Op, s.Stage, s.Index
	slot.Start, slot.End, slot.Wait = s.Start, s.End, s.Wait
	slot.Parent, slot.After = s.Parent, s.After
	atomic.StoreUint64(&slot.ID, s.ID)
	// A call that returns after its slots were released or its task
	// ended (nothing the engine does: it waits for the goroutines) is
	// recorded as any other. Both set their flag before they read the
	// slots, so the span is either read there or seen here — perhaps
	// both: a span recorded twice is the same span.
	if sl.released.Load() || t.ended.Load() {
		t.addLocked(s)
	}
	return true
}

// takeSlots moves the spans written in the task's slots into its buffer,
// each once; t.mu is held.
func (t *spanTask) takeSlots() {
	sl := t.slots
	if sl == nil {
		return
	}
	n := min(sl.taken.Load(), int64(len(sl.spans)))
	// One allocation for them all, the task's own span included, rather
	// than a buffer doubling its way up to a fan-out's width.
	t.buf = slices.Grow(t.buf, int(n)+1)
	for i := range n {
		slot := &sl.spans[i]
		if atomic.LoadUint64(&slot.ID) == 0 {
			continue
		}
		t.buf = append(t.buf, *slot)
		t.last = max(t.last, slot.End)
		atomic.StoreUint64(&slot.ID, 0) // taken
	}
}

// end closes the task and reports its spans, its own last. The task ends
// with its last span: what it does after that is on no path.
func (t *spanTask) end() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.ended.Store(true) // before the slots are read: see callSlots.put
	t.takeSlots()
	t.self.End = max(t.last, t.self.Start)
	buf := append(t.buf, t.self)
	t.buf = nil
	run := t.run
	t.mu.Unlock()
	if run != "" {
		t.rec.obs.Spans(run, buf)
	}
}

// flush reports what the task recorded so far, and its own span as it
// stands; the rest follows when it ends, its own span again (the later
// report of a span ID supersedes the earlier).
func (t *spanTask) flush() {
	t.mu.Lock()
	if t.ended.Load() {
		t.mu.Unlock()
		return
	}
	t.takeSlots()
	self := t.self
	self.End = max(t.last, self.Start)
	out := append(t.buf, self)
	t.buf = make([]Span, 0, taskBuf)
	run := t.run
	t.mu.Unlock()
	t.rec.obs.Spans(run, out)
}

// finished is called just before the engine reports run finished: the
// tasks of the run still in progress (the one finishing it among them)
// report what they recorded so far, so that a snapshot of the finished
// run holds every span up to its last step end.
func (r *spanRec) finished(run string) {
	if r == nil {
		return
	}
	v, ok := r.runs.Load(run)
	if !ok {
		return
	}
	rs := v.(*runSpans)
	var open []*spanTask
	for t := rs.tasks.Load(); t != nil; t = t.inRun {
		if !t.ended.Load() {
			open = append(open, t)
		}
	}
	slices.SortFunc(open, func(a, b *spanTask) int { return cmp.Compare(a.self.ID, b.self.ID) })
	for _, t := range open {
		t.flush()
	}
}

// body records a step body of the task ctx runs in, from start to end.
func (r *spanRec) body(ctx context.Context, s, idx int, start, end time.Duration) {
	if r == nil {
		return
	}
	if t := taskOf(ctx); t != nil {
		t.add(&Span{Kind: SpanBody, Start: start, End: end, Stage: int32(s), Index: int32(idx)})
	}
}

// forget drops what the recorder keeps about a finished run (a task of it
// still in progress reports its spans when it ends all the same).
func (r *spanRec) forget(run string) {
	if r == nil {
		return
	}
	r.runs.Delete(run)
}

// spanWorld is the engine's world while spans are recorded: every call
// made in a task is timed and reported as a span of it, and every
// delivery's handler runs as a task.
//
// Its methods keep their frames small, the work after the call out of
// line (call.done): a step's publish and create run in goroutines of
// their own, which start with a small stack, and a wrapper that pushed
// them over it made each one copy its stack (newstack: ~4% of a
// 256-branch fan-out's CPU on mem).
type spanWorld struct {
	world.World
	r *spanRec
}

// Unwrap returns the world spans are recorded on.
func (w *spanWorld) Unwrap() world.World { return w.World }

// call is one call in flight (t nil: made outside a task, not timed).
type call struct {
	t     *spanTask
	start time.Duration
	wait  *world.CallWait
}

// begin starts timing a call made with ctx.
func (w *spanWorld) begin(ctx context.Context) (context.Context, call) { return w.r.call(ctx) }

// call starts timing a call made with ctx: nothing without spans (r
// nil), or outside a task. The engine starts the calls a fan-out's
// dispatch makes on Engine.base with it, in their own frame.
func (r *spanRec) call(ctx context.Context) (context.Context, call) {
	if r == nil {
		return ctx, call{}
	}
	t := taskOf(ctx)
	if t == nil {
		return ctx, call{}
	}
	if r.waits {
		return r.withWait(ctx, t)
	}
	return ctx, call{t: t, start: r.rt.Now()}
}

// withWait starts timing a call on a world that reports waits for
// capacity: the call's context carries its CallWait.
//
//go:noinline
func (r *spanRec) withWait(ctx context.Context, t *spanTask) (context.Context, call) {
	c := call{t: t, wait: &world.CallWait{}}
	ctx = world.WithCallWait(ctx, c.wait)
	c.start = r.rt.Now()
	return ctx, c
}

// done reports the call as a span of its task (nothing outside a task),
// with ID id when it is not 0 (reserved), and returns its end.
//
//go:noinline
func (c call) done(id uint64, op SpanOp, stage, index int) time.Duration {
	if c.t == nil {
		return 0
	}
	s := Span{Kind: SpanCall, Op: op, Start: c.start, End: c.t.rec.rt.Now(), Stage: int32(stage), Index: int32(index), ID: id}
	if c.wait != nil {
		s.Wait = min(c.wait.D, s.End-s.Start)
	}
	c.t.add(&s)
	return s.End
}

// doneAppend reports an append of an event of kind about entity: a step
// event names its step.
//
//go:noinline
func (c call) doneAppend(kind world.EventKind, entity string) {
	if c.t == nil {
		return
	}
	stage, index := -1, -1
	switch kind {
	case world.StepCreated, world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying:
		if s, i, ok := parseStepID(entity); ok {
			stage, index = s, i
		}
	}
	c.done(0, opAppend[kind], stage, index)
}

// appendFrom appends ev, an event of step (stage, index), to run's log
// for an engine that read the clock (start) just before the call and
// reads it again just after: with spans recorded, the call's span is timed
// with those same readings rather than two more (a step's completion: its
// body's end, its own end). It returns the append's answer, the time it
// returned and its error.
func (e *Engine) appendFrom(ctx context.Context, run string, ev world.Event, stage, index int, start time.Duration) (world.AppendResult, time.Duration, error) {
	var t *spanTask
	if e.spans != nil {
		t = taskOf(ctx)
	}
	if t == nil {
		res, err := e.base.Append(ctx, run, ev, world.Precondition{})
		return res, e.rt.Now(), err
	}
	c := call{t: t, start: start}
	if e.spans.waits {
		ctx, c = e.spans.withWait(ctx, t)
		c.start = start
	}
	res, err := e.base.Append(ctx, run, ev, world.Precondition{})
	end := c.done(0, opAppend[ev.Kind], stage, index)
	return res, end, err
}

// CreateRun times run_create.
func (w *spanWorld) CreateRun(ctx context.Context, r world.Run) error {
	ctx, c := w.begin(ctx)
	err := w.World.CreateRun(ctx, r)
	c.done(0, opCreateRun, -1, -1)
	return err
}

// GetRun times run_get.
func (w *spanWorld) GetRun(ctx context.Context, id string) (world.Run, error) {
	ctx, c := w.begin(ctx)
	r, err := w.World.GetRun(ctx, id)
	c.done(0, opGetRun, -1, -1)
	return r, err
}

// Append times the append by its event kind; a step event names its step.
func (w *spanWorld) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	ctx, c := w.begin(ctx)
	res, err := w.World.Append(ctx, run, ev, pre)
	c.doneAppend(ev.Kind, ev.Entity)
	return res, err
}

// Load times log_load.
func (w *spanWorld) Load(ctx context.Context, run string) ([]world.Event, error) {
	ctx, c := w.begin(ctx)
	evs, err := w.World.Load(ctx, run)
	c.done(0, opLoad, -1, -1)
	return evs, err
}

// HookRun times hook_lookup.
func (w *spanWorld) HookRun(ctx context.Context, token string) (string, error) {
	ctx, c := w.begin(ctx)
	run, err := w.World.HookRun(ctx, token)
	c.done(0, opHookRun, -1, -1)
	return run, err
}

// Publish times publish and remembers when the message was first
// published, for its delivery's queue span.
func (w *spanWorld) Publish(ctx context.Context, m world.Message, opt world.PublishOptions) (bool, error) {
	ctx, c := w.begin(ctx)
	note := c.publishingMessage(m.ID)
	dup, err := w.World.Publish(ctx, m, opt)
	c.published(note, m.ID, err == nil)
	return dup, err
}

// pubNote is a publish in flight: the span ID it will have and, for the
// message's first publish, its note: a step's (step), or one in the
// run's pubs (note; -1: none).
type pubNote struct {
	rs           *runSpans
	id           uint64
	step         *stepNote
	note         int32
	stage, index int32
}

// publishingMessage is publishing for a message whose step, if any, is
// read from its ID.
//
//go:noinline
func (c call) publishingMessage(msg string) pubNote {
	if c.t == nil {
		return pubNote{}
	}
	stage, index := messageStep(msg)
	return c.publishing(msg, stage, index)
}

// publishing reserves the publish's span ID and notes, before the call,
// that message msg, about step (stage, index) (-1, -1: none), is being
// published by it: a consumer may receive the message before the
// publisher sees its call return. Only the message's first publish takes
// the note.
//
//go:noinline
func (c call) publishing(msg string, stage, index int) pubNote {
	if c.t == nil {
		return pubNote{}
	}
	p := pubNote{rs: c.t.rs, note: -1, stage: int32(stage), index: int32(index)}
	if sl := c.t.slots; sl != nil {
		p.id = sl.reserve()
	}
	if p.id == 0 {
		c.t.mu.Lock()
		p.id = c.t.nextID()
		c.t.mu.Unlock()
	}
	rs := p.rs
	if rs == nil {
		return p
	}
	if n := rs.stepNote(stage, index); n != nil {
		if n.span.CompareAndSwap(0, p.id) {
			p.step = n
		}
		return p
	}
	rs.mu.Lock()
	if _, seen := rs.pubs[msg]; !seen {
		p.note = int32(len(rs.notes))
		rs.pubs[msg] = p.note
		rs.notes = append(rs.notes, published{end: -1, span: p.id})
	}
	rs.mu.Unlock()
	return p
}

// published reports the publish as a span of its task and completes its
// note: the call returned at its end, or failed (the message was not
// published).
//
//go:noinline
func (c call) published(p pubNote, msg string, ok bool) {
	if c.t == nil {
		return
	}
	end := c.done(p.id, opPublish, int(p.stage), int(p.index))
	if n := p.step; n != nil {
		if ok {
			n.end.Store(int64(end) + 1)
		} else {
			n.span.CompareAndSwap(p.id, 0)
		}
		return
	}
	if p.note < 0 {
		return
	}
	rs := p.rs
	rs.mu.Lock()
	if ok {
		rs.notes[p.note].end = end
	} else {
		delete(rs.pubs, msg)
	}
	rs.mu.Unlock()
}

// Consume runs every delivery's handler as a task, after the message's
// queue span.
func (w *spanWorld) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	return w.World.Consume(ctx, opt, func(ctx context.Context, d world.Delivery) error {
		t := w.r.delivered(ctx, &d)
		err := h(t, d)
		t.end()
		return err
	})
}

// delivered starts the task of a delivery, in its run's tasks, with
// the message's queue span: from its first publish returning to now.
func (r *spanRec) delivered(ctx context.Context, d *world.Delivery) *spanTask {
	now := r.rt.Now()
	t := r.newTask(ctx, SpanTask, now)
	stage, index := messageStep(d.ID)
	t.self.Stage, t.self.Index = int32(stage), int32(index)
	if d.Run == "" {
		return t
	}
	rs := r.runOf(d.Run)
	t.run, t.rs = d.Run, rs // t is not shared yet
	var pub published
	ok := false
	n := rs.stepNote(stage, index)
	if n != nil {
		if pub.span = n.span.Load(); pub.span != 0 {
			pub.end, ok = time.Duration(n.end.Load()-1), true
		}
	}
	rs.join(t)
	if n == nil {
		rs.mu.Lock()
		var i int32
		if i, ok = rs.pubs[d.ID]; ok {
			pub = rs.notes[i]
		}
		rs.mu.Unlock()
	}
	if !ok {
		return t
	}
	// A delivery that came before its publisher saw the call return (end
	// -1, or a later clock reading) waited for nothing: its queue span is
	// empty, after the publish.
	start := now
	if pub.end >= 0 && pub.end <= now {
		start = pub.end
	}
	q := Span{Kind: SpanQueue, Op: opDeliver, Start: start, End: now, Stage: int32(stage), Index: int32(index),
		ID: t.nextID(), After: pub.span}
	if r.waits {
		q.Wait = min(world.DeliveryWait(ctx), q.End-q.Start)
	}
	t.buf = append(t.buf, q)
	t.self.After = q.ID
	return t
}

// messageStep is the step a step message ID ("step/<run>/<stage>.<index>")
// names; -1, -1 for other messages.
func messageStep(id string) (stage, index int) {
	if !IsStepMessage(id) {
		return -1, -1
	}
	if s, i, ok := parseStepID(id[strings.LastIndexByte(id, '/')+1:]); ok {
		return s, i
	}
	return -1, -1
}
