// Package worldtest is the conformance suite every world runs: mem, nats,
// sim and the profile decorator. A world's test calls Run with a Factory;
// the suite checks the contract documented in package world — log ordering,
// the Append rules and their typed errors, the guard, pending counts,
// concurrent appends to one run, hooks, streams, and the queue's idempotent
// publish, delays, attempt numbers, visibility timeout, both retry styles,
// concurrency limit and Stop.
//
// Test bodies wait only through the world's Runtime (Sleep, futures, groups)
// and world calls, never through time, channels or sync, so the same suite
// runs in virtual time on the sim world.
package worldtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
)

// Harness is one world under test.
type Harness struct {
	World world.World
	// Run runs fn as a task of the world's runtime and returns when fn
	// returns. Real-time worlds call fn directly (see Direct); the sim world
	// runs it as its root task in virtual time.
	Run func(fn func(ctx context.Context))
}

// Factory returns a fresh, empty world configured by opts. It registers the
// world's Close with t.Cleanup itself.
type Factory func(t *testing.T, opts world.Options) Harness

// Direct is the Harness.Run of real-time worlds: it calls fn on the calling
// goroutine.
func Direct(fn func(ctx context.Context)) { fn(context.Background()) }

// Timings of the queue subtests: short, so the suite takes a few seconds on
// real-time worlds.
const (
	// VisibilityTimeout is the visibility timeout of the queue subtests.
	VisibilityTimeout = 300 * time.Millisecond
	// RetryDelay is the first retry delay of the queue subtests.
	RetryDelay = 5 * time.Millisecond
	// settleWait is how long the suite waits for something that must not
	// happen (a duplicate delivery, a delivery after Stop).
	settleWait = 100 * time.Millisecond
	// deadline bounds every wait for something that must happen.
	deadline = 5 * time.Second
	// vtEarliest is the shortest gap between a delivery and its redelivery
	// after the visibility timeout that the suite accepts, as the handlers
	// see them. The timeout runs from the server's delivery, the handler's
	// clock from when the handler starts; on a loaded machine with a
	// replicated stream the two were 32 ms apart (a 268 ms gap for a 300 ms
	// timeout). Half the timeout still tells a redelivery that waited for it
	// from one that did not (retries come after RetryDelay).
	vtEarliest = VisibilityTimeout / 2
)

// queueOptions are the options of the queue subtests.
func queueOptions(style world.RetryStyle) world.Options {
	return world.Options{RetryStyle: style, VisibilityTimeout: VisibilityTimeout, RetryDelay: RetryDelay}
}

type subtest struct {
	name string
	opts world.Options
	fn   func(c *env)
}

// Run runs every conformance subtest, each on a fresh world from f.
func Run(t *testing.T, f Factory) {
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Log", logTests},
		{"Guard", guardTests},
		{"Hooks", hookTests},
		{"Streams", streamTests},
		{"Queue", queueTests},
		{"World", worldTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) { runOne(t, f, st) })
			}
		})
	}
}

// abort unwinds a test body after a fatal check. Test bodies may run on a
// runtime task rather than the test goroutine, where t.FailNow is not
// allowed, so fatal checks panic with abort and runOne recovers it.
type abort struct{}

func runOne(t *testing.T, f Factory, st subtest) {
	h := f(t, st.opts)
	h.Run(func(ctx context.Context) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(abort); !ok {
					panic(r)
				}
			}
		}()
		st.fn(&env{T: t, H: h, W: h.World, RT: h.World.Runtime(), Ctx: ctx})
	})
}

// env is the context of one subtest body.
type env struct {
	T   *testing.T
	H   Harness
	W   world.World
	RT  world.Runtime
	Ctx context.Context
}

// Fatalf reports a failure and ends the subtest body.
func (c *env) Fatalf(format string, args ...any) {
	c.T.Helper()
	c.T.Errorf(format, args...)
	panic(abort{})
}

// NoErr ends the subtest when err is not nil.
func (c *env) NoErr(err error, what string) {
	c.T.Helper()
	if err != nil {
		c.Fatalf("%s: unexpected error: %v", what, err)
	}
}

// IsErr ends the subtest unless errors.Is(err, want).
func (c *env) IsErr(err, want error, what string) {
	c.T.Helper()
	if !errors.Is(err, want) {
		c.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// WaitFor polls cond through the runtime until it holds or limit passes,
// and reports whether it held.
func (c *env) WaitFor(limit time.Duration, cond func() bool) bool {
	end := c.RT.Now() + limit
	for !cond() {
		if c.RT.Now() > end {
			return cond()
		}
		if err := c.RT.Sleep(c.Ctx, 2*time.Millisecond); err != nil {
			return cond()
		}
	}
	return true
}

// Settle sleeps d through the runtime.
func (c *env) Settle(d time.Duration) {
	if err := c.RT.Sleep(c.Ctx, d); err != nil {
		c.Fatalf("sleep: %v", err)
	}
}

// --- shared fixtures ---

func (c *env) createRun(id string) {
	c.T.Helper()
	c.NoErr(c.W.CreateRun(c.Ctx, world.Run{ID: id, Deployment: "dep", SpecVersion: 1}), "CreateRun "+id)
}

func (c *env) append(run string, ev world.Event) world.AppendResult {
	c.T.Helper()
	res, err := c.W.Append(c.Ctx, run, ev, world.Precondition{})
	c.NoErr(err, fmt.Sprintf("Append %s %q to %s", ev.Kind, ev.Entity, run))
	return res
}

func (c *env) appendErr(run string, ev world.Event, want error) {
	c.T.Helper()
	_, err := c.W.Append(c.Ctx, run, ev, world.Precondition{})
	c.IsErr(err, want, fmt.Sprintf("Append %s %q to %s", ev.Kind, ev.Entity, run))
}

func (c *env) load(run string) []world.Event {
	c.T.Helper()
	evs, err := c.W.Load(c.Ctx, run)
	c.NoErr(err, "Load "+run)
	return evs
}

// recorder collects deliveries from handlers running on other tasks.
type recorder struct {
	mu   sync.Mutex
	got  []delivered
	live int // handlers running now
	peak int // most handlers running at once
}

type delivered struct {
	world.Delivery
	At time.Duration
}

func (r *recorder) add(d world.Delivery, at time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, delivered{d, at})
	return len(r.got)
}

func (r *recorder) snapshot() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivered(nil), r.got...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *recorder) enter() {
	r.mu.Lock()
	r.live++
	r.peak = max(r.peak, r.live)
	r.mu.Unlock()
}

func (r *recorder) leave() {
	r.mu.Lock()
	r.live--
	r.mu.Unlock()
}

// consume starts a consumer; the caller defers c.stop(sub).
func (c *env) consume(conc int, h world.Handler) world.Subscription {
	c.T.Helper()
	sub, err := c.W.Consume(c.Ctx, world.ConsumeOptions{Concurrency: conc}, h)
	c.NoErr(err, "Consume")
	return sub
}

// stop stops sub, waiting for its running handlers.
func (c *env) stop(sub world.Subscription) {
	c.T.Helper()
	if err := sub.Stop(c.Ctx); err != nil {
		c.T.Errorf("Stop: %v", err)
	}
}

func (c *env) publish(m world.Message, delay time.Duration) bool {
	c.T.Helper()
	dup, err := c.W.Publish(c.Ctx, m, world.PublishOptions{Delay: delay})
	c.NoErr(err, "Publish "+m.ID)
	return dup
}
