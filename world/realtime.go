package world

import (
	"context"
	"sync"
	"time"
)

// Real is the Runtime of worlds that run in real time: the monotonic clock
// and goroutines. Its epoch is the moment it was created.
type Real struct{ epoch time.Time }

// NewReal returns a real-time Runtime whose clock starts at zero now.
func NewReal() *Real { return &Real{epoch: time.Now()} }

// Now returns the monotonic time since the epoch (time.Since uses the
// monotonic clock reading).
func (r *Real) Now() time.Duration { return time.Since(r.epoch) }

// Sleep waits for d or until ctx is done.
func (r *Real) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Go runs fn on a new goroutine.
func (r *Real) Go(fn func()) { go fn() }

// NewGroup returns a goroutine group.
func (r *Real) NewGroup() Group { return &realGroup{} }

// NewFuture returns a channel-backed future.
func (r *Real) NewFuture() Future { return &realFuture{ch: make(chan struct{})} }

// NewSemaphore returns a channel-backed semaphore.
func (r *Real) NewSemaphore(n int) Semaphore { return realSemaphore(make(chan struct{}, n)) }

type realGroup struct {
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (g *realGroup) Go(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil {
			g.once.Do(func() { g.err = err })
		}
	}()
}

func (g *realGroup) Wait() error { g.wg.Wait(); return g.err }

type realFuture struct {
	once sync.Once
	ch   chan struct{}
}

func (f *realFuture) Resolve() { f.once.Do(func() { close(f.ch) }) }

func (f *realFuture) Done() bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

func (f *realFuture) Wait(ctx context.Context, timeout time.Duration) bool {
	if timeout <= 0 {
		select {
		case <-f.ch:
			return true
		case <-ctx.Done():
			return f.Done()
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-f.ch:
		return true
	case <-t.C:
		return f.Done()
	case <-ctx.Done():
		return f.Done()
	}
}

type realSemaphore chan struct{}

func (s realSemaphore) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s realSemaphore) Release() { <-s }
