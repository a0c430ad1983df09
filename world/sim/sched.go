package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"time"

	"github.com/durabench/durabench/world"
)

// Errors Run reports when it returns before its root task finished.
var (
	// ErrDeadlock: no task is runnable and no timer is pending, yet the root
	// task has not returned (it waits for something that can never happen).
	ErrDeadlock = errors.New("sim: deadlock: no runnable task and no pending timer")
	// ErrTimeLimit: the run's virtual clock passed Config.RunLimit.
	ErrTimeLimit = errors.New("sim: virtual time limit reached")
	// ErrBusy: Run was called from outside the simulation while another Run
	// was driving it.
	ErrBusy = errors.New("sim: world is already running")
	// ErrTaskPanic: a task panicked; the world is unusable afterwards.
	ErrTaskPanic = errors.New("sim: task panicked")
)

// task is one simulated thread of control. It runs on a worker goroutine
// and only while it holds the baton.
type task struct {
	id   int
	kind string
	wk   *worker
	// gen counts the task's parks. Every wake-up registered during a park
	// carries the gen of that park; the first one popped wins and bumps gen,
	// so the others (a timeout after a resolve, say) are ignored.
	gen  uint64
	root bool
	dead bool
}

// worker is a goroutine that runs tasks one after another. Finished tasks
// leave their worker in a pool for the next spawn, which spares a goroutine
// start and its stack growth per task.
type worker struct {
	wake chan struct{}
	t    *task
	fn   func()
}

// entry is a scheduled event: resume task t (when its gen still matches) or
// run fn in scheduler context (fn must not park).
type entry struct {
	at  time.Duration
	seq uint64
	t   *task
	gen uint64
	fn  func()
}

func (a *entry) less(b *entry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap of entries by (at, seq), kept by value to
// spare an allocation per scheduling point.
type eventHeap []entry

func (h *eventHeap) push(e entry) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() entry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = entry{}
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].less(&s[l]) {
			m = r
		}
		if !s[m].less(&s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// stopReason is why the driver regained control.
type stopReason int

const (
	stopRootDone stopReason = iota
	stopDeadlock
	stopLimit
	stopCtx
	stopPanic
)

// sched is the virtual-time scheduler. Exactly one goroutine touches its
// state at any moment: the task holding the baton, or the driver (Run,
// Close) while no task does. Channel hand-offs order those accesses, so no
// mutex is needed.
type sched struct {
	now    time.Duration
	seq    uint64
	events eventHeap
	cur    *task
	nextID int
	live   map[int]*task
	pool   []*worker // idle workers

	driving  bool
	driver   chan stopReason
	runCtx   context.Context
	deadline time.Duration // virtual time at which the current Run stops
	pops     uint64

	closing  bool
	closeAck chan struct{}
	panicErr error

	trace *Trace
}

func newSched(tr *Trace) *sched {
	return &sched{
		live:     map[int]*task{},
		driver:   make(chan stopReason, 1),
		closeAck: make(chan struct{}),
		trace:    tr,
	}
}

// inTask reports whether the caller is the running task. Calls from outside
// the simulation are only legal while no Run drives it.
func (s *sched) inTask() bool { return s.cur != nil }

func (s *sched) record(op string, run, detail string) {
	if s.trace == nil {
		return
	}
	id := 0
	if s.cur != nil {
		id = s.cur.id
	}
	s.trace.add(Record{At: s.now, Task: id, Op: op, Run: run, Detail: detail})
}

// spawn creates a task runnable at the current time. Its worker waits for
// the baton before running fn.
func (s *sched) spawn(kind string, root bool, fn func()) *task {
	if s.closing {
		return nil
	}
	s.nextID++
	t := &task{id: s.nextID, kind: kind, root: root}
	s.live[t.id] = t
	if s.trace != nil {
		s.record("spawn", "", fmt.Sprintf("t%d %s", t.id, kind))
	}
	var wk *worker
	if n := len(s.pool); n > 0 {
		wk = s.pool[n-1]
		s.pool[n-1] = nil
		s.pool = s.pool[:n-1]
	} else {
		wk = &worker{wake: make(chan struct{}, 1)}
		go s.work(wk)
	}
	wk.t, wk.fn, t.wk = t, fn, wk
	s.wakeAt(t, s.now)
	return t
}

// work is a worker goroutine's loop: wait for the baton, run the task, pass
// the baton on, go back to the pool.
func (s *sched) work(wk *worker) {
	panicked := false
	defer func() {
		// Reached when Close ends the goroutine (runtime.Goexit in park, or
		// a wake-up during shutdown), or after a task panicked; then the
		// driver owns the state and was already told.
		if !panicked {
			s.closeAck <- struct{}{}
		}
	}()
	for {
		<-wk.wake
		if s.closing {
			return
		}
		t, fn := wk.t, wk.fn
		wk.fn = nil
		if !s.call(t, fn) {
			panicked = true
			return
		}
		t.dead = true
		delete(s.live, t.id)
		s.pool = append(s.pool, wk)
		if t.root {
			s.cur = nil
			s.driver <- stopRootDone
			continue
		}
		s.handoff()
	}
}

// call runs a task's function and reports whether it returned. A panic is
// reported to the driver; runtime.Goexit (Close) unwinds through.
func (s *sched) call(t *task, fn func()) (returned bool) {
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			t.dead = true
			delete(s.live, t.id)
			s.panicErr = fmt.Errorf("%w: task t%d (%s): %v\n%s", ErrTaskPanic, t.id, t.kind, r, debug.Stack())
			s.cur = nil
			s.driver <- stopPanic
		}
	}()
	fn()
	return true
}

// wakeAt schedules t to resume at time at (for its current park).
func (s *sched) wakeAt(t *task, at time.Duration) {
	s.seq++
	s.events.push(entry{at: at, seq: s.seq, t: t, gen: t.gen})
}

// after runs fn in scheduler context at now+d. fn must not park.
func (s *sched) after(d time.Duration, fn func()) {
	s.seq++
	s.events.push(entry{at: s.now + d, seq: s.seq, fn: fn})
}

// next pops events until a task to resume is found, advancing the clock and
// running callbacks. It returns nil and a reason when the driver must take
// over.
func (s *sched) next() (*task, stopReason) {
	for len(s.events) > 0 {
		s.pops++
		if s.pops&1023 == 0 && s.runCtx != nil && s.runCtx.Err() != nil {
			return nil, stopCtx
		}
		if s.events[0].at > s.deadline {
			return nil, stopLimit
		}
		e := s.events.pop()
		if e.at > s.now {
			s.now = e.at
		}
		if e.t == nil {
			e.fn()
			continue
		}
		if e.t.dead || e.gen != e.t.gen {
			continue // a stale wake-up of an earlier park
		}
		e.t.gen++
		return e.t, 0
	}
	return nil, stopDeadlock
}

// handoff gives the baton to the next task, or back to the driver.
func (s *sched) handoff() {
	t, why := s.next()
	if t == nil {
		s.cur = nil
		s.driver <- why
		return
	}
	s.cur = t
	t.wk.wake <- struct{}{}
}

// park suspends the running task until one of the wake-ups it registered
// (with wakeAt or a waiter list) is popped. The caller registers them first.
func (s *sched) park() {
	t := s.cur
	if s.closing {
		runtime.Goexit()
	}
	n, why := s.next()
	if n == t {
		return
	}
	if n == nil {
		s.cur = nil
		s.driver <- why
	} else {
		s.cur = n
		n.wk.wake <- struct{}{}
	}
	<-t.wk.wake
	if s.closing {
		runtime.Goexit()
	}
}

// sleep parks the running task for d of virtual time (d <= 0 yields to the
// tasks runnable now).
func (s *sched) sleep(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s.wakeAt(s.cur, s.now+d)
	s.park()
}

// run drives the scheduler with fn as the root task until fn returns, the
// simulation deadlocks, the virtual time limit passes or ctx is done.
func (s *sched) run(ctx context.Context, limit time.Duration, fn func()) error {
	if s.inTask() {
		fn() // already inside the simulation
		return nil
	}
	if s.driving {
		return ErrBusy
	}
	if s.panicErr != nil {
		return s.panicErr
	}
	if s.closing {
		return world.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.driving = true
	defer func() { s.driving = false }()
	s.runCtx = ctx
	s.deadline = s.now + limit
	if limit <= 0 {
		s.deadline = 1<<63 - 1
	}
	s.spawn("root", true, fn)
	s.handoff()
	switch <-s.driver {
	case stopRootDone:
		return nil
	case stopDeadlock:
		return ErrDeadlock
	case stopLimit:
		return fmt.Errorf("%w (%v)", ErrTimeLimit, limit)
	case stopCtx:
		return ctx.Err()
	default:
		return s.panicErr
	}
}

// shutdown ends every live task: each one is resumed in turn and exits at
// once (runtime.Goexit, so its deferred calls run). Called by the driver.
func (s *sched) shutdown() {
	s.closing = true
	s.events = nil
	ids := make([]int, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		if t, ok := s.live[id]; ok {
			t.wk.wake <- struct{}{}
			<-s.closeAck
		}
	}
	for _, wk := range s.pool {
		wk.wake <- struct{}{}
		<-s.closeAck
	}
	s.pool = nil
}

// waiters is a list of parked tasks waiting for one condition.
type waiters []waiter

type waiter struct {
	t   *task
	gen uint64
}

func (w *waiters) add(t *task) { *w = append(*w, waiter{t, t.gen}) }

// wakeAll makes every still-waiting task runnable now.
func (w *waiters) wakeAll(s *sched) {
	for _, x := range *w {
		if !x.t.dead && x.t.gen == x.gen {
			s.seq++
			s.events.push(entry{at: s.now, seq: s.seq, t: x.t, gen: x.gen})
		}
	}
	*w = (*w)[:0]
}
