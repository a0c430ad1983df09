package sim

import (
	"context"
	"time"

	"github.com/durabench/durabench/world"
)

// simRuntime is the world.Runtime of a sim world: virtual clock, tasks that
// run one at a time, and parking primitives. Calls made from outside a task
// (while no Run drives the world) are wrapped in a one-shot Run.
type simRuntime struct{ w *World }

var _ world.Runtime = simRuntime{}

// Now returns the virtual time.
func (r simRuntime) Now() time.Duration { return r.w.s.now }

// Sleep parks the task for d of virtual time. ctx is checked before parking
// only: a virtual-time task cannot be interrupted while parked.
func (r simRuntime) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := r.w.s
	if !s.inTask() {
		var err error
		if rerr := r.w.Run(ctx, func(ctx context.Context) { err = r.Sleep(ctx, d) }); rerr != nil {
			return rerr
		}
		return err
	}
	if s.trace != nil {
		s.record("sleep", "", d.String())
	}
	s.sleep(d)
	return nil
}

// Go spawns fn as a task runnable now; the caller keeps running.
func (r simRuntime) Go(fn func()) { r.w.s.spawn("go", false, fn) }

// NewGroup returns a group of tasks.
func (r simRuntime) NewGroup() world.Group { return &group{w: r.w} }

// NewFuture returns an unresolved future.
func (r simRuntime) NewFuture() world.Future { return &future{w: r.w} }

// NewSemaphore returns a semaphore with n permits.
func (r simRuntime) NewSemaphore(n int) world.Semaphore { return &semaphore{w: r.w, free: n} }

type group struct {
	w       *World
	n       int
	err     error
	waiting waiters
}

func (g *group) Go(fn func() error) {
	s := g.w.s
	g.n++
	s.spawn("group", false, func() {
		err := fn()
		if err != nil && g.err == nil {
			g.err = err
		}
		g.n--
		if g.n == 0 {
			g.waiting.wakeAll(s)
		}
	})
}

func (g *group) Wait() error {
	s := g.w.s
	if !s.inTask() {
		var err error
		if rerr := g.w.Run(context.Background(), func(context.Context) { err = g.Wait() }); rerr != nil {
			return rerr
		}
		return err
	}
	for g.n > 0 {
		g.waiting.add(s.cur)
		s.park()
	}
	return g.err
}

type future struct {
	w       *World
	done    bool
	waiting waiters
}

func (f *future) Resolve() {
	if f.done {
		return
	}
	f.done = true
	f.waiting.wakeAll(f.w.s)
}

func (f *future) Done() bool { return f.done }

func (f *future) Wait(ctx context.Context, timeout time.Duration) bool {
	if f.done {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	s := f.w.s
	if !s.inTask() {
		var ok bool
		if rerr := f.w.Run(ctx, func(ctx context.Context) { ok = f.Wait(ctx, timeout) }); rerr != nil {
			return f.done
		}
		return ok
	}
	f.waiting.add(s.cur)
	if timeout > 0 {
		s.wakeAt(s.cur, s.now+timeout)
	}
	s.park()
	return f.done
}

type semaphore struct {
	w       *World
	free    int
	waiting []*task // FIFO; a released permit goes straight to the first
}

func (m *semaphore) Acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := m.w.s
	if m.free > 0 {
		m.free--
		return nil
	}
	if !s.inTask() {
		var err error
		if rerr := m.w.Run(ctx, func(ctx context.Context) { err = m.Acquire(ctx) }); rerr != nil {
			return rerr
		}
		return err
	}
	m.waiting = append(m.waiting, s.cur)
	s.park() // Release hands the permit over and wakes this task

	return nil
}

func (m *semaphore) Release() {
	if len(m.waiting) == 0 {
		m.free++
		return
	}
	t := m.waiting[0]
	m.waiting = m.waiting[1:]
	m.w.s.wakeAt(t, m.w.s.now)
}
