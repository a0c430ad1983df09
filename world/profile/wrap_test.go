package profile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/worldtest"
)

// The decorator tests run the real mem world inside a synctest bubble: mem's
// Runtime is the real clock and goroutines, which the bubble runs on a fake
// clock, so injected latencies are observed exactly and take no wall time.

func mustParse(t *testing.T, yaml string) *profile.Profile {
	t.Helper()
	p, err := profile.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newMem(t *testing.T, opts world.Options) *mem.World {
	w := mem.New(opts)
	t.Cleanup(func() { w.Close() })
	return w
}

// elapsed returns how long fn took on w's runtime clock.
func elapsed(w world.World, fn func()) time.Duration {
	start := w.Runtime().Now()
	fn()
	return w.Runtime().Now() - start
}

func TestNoneIsTheWorldItself(t *testing.T) {
	m := newMem(t, world.Options{})
	none, err := profile.Load("none")
	if err != nil {
		t.Fatal(err)
	}
	if w := profile.Wrap(m, none, 1); w != world.World(m) {
		t.Errorf("Wrap(none) = %T, want the mem world itself", w)
	}
	if w := profile.Wrap(m, nil, 1); w != world.World(m) {
		t.Errorf("Wrap(nil) = %T, want the mem world itself", w)
	}
}

func TestWrapKeepsIdentity(t *testing.T) {
	m := newMem(t, world.Options{RetryStyle: world.Fresh, Guard: true})
	lan, _ := profile.Load("lan")
	w := profile.Wrap(m, lan, 1)
	pw, ok := w.(*profile.World)
	if !ok {
		t.Fatalf("Wrap(lan) = %T", w)
	}
	if w.Name() != "mem" || w.Capabilities() != m.Capabilities() || w.Runtime() != m.Runtime() || pw.Unwrap() != world.World(m) || pw.Profile() != lan {
		t.Errorf("wrapped world: name %q caps %+v", w.Name(), w.Capabilities())
	}
}

// TestLatencyMatchesProfile: latencies observed on the runtime clock follow
// the profile's distribution; a fixed-0 or none profile adds nothing.
func TestLatencyMatchesProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMem(t, world.Options{})
		w := profile.Wrap(m, mustParse(t, `
ops:
  default: {latency: 0}
  run_get: {latency: {dist: lognormal, median: 20ms, p99: 80ms}}
  step_created: {latency: {dist: fixed, value: 25ms}}
  publish: {latency: {dist: normal, mean: 15ms, stddev: 3ms}}
`), 42)
		if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
			t.Fatal(err)
		}
		const n = 2000
		var gets, pubs []time.Duration
		for i := range n {
			gets = append(gets, elapsed(w, func() {
				if _, err := w.GetRun(ctx, "r"); err != nil {
					t.Fatal(err)
				}
			}))
			pubs = append(pubs, elapsed(w, func() {
				if _, err := w.Publish(ctx, world.Message{ID: fmt.Sprint(i)}, world.PublishOptions{}); err != nil {
					t.Fatal(err)
				}
			}))
		}
		slices.Sort(gets)
		slices.Sort(pubs)
		if p50, p99 := quantile(gets, 0.5), quantile(gets, 0.99); !within(p50, 20*ms, 0.10) || !within(p99, 80*ms, 0.25) {
			t.Errorf("run_get p50 %v p99 %v, want ~20ms ~80ms", p50, p99)
		}
		if p50 := quantile(pubs, 0.5); !within(p50, 15*ms, 0.05) {
			t.Errorf("publish p50 %v, want ~15ms", p50)
		}
		if d := elapsed(w, func() {
			w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{})
		}); d != 25*ms {
			t.Errorf("step_created took %v, want exactly 25ms", d)
		}
		// default is fixed 0: no time passes.
		if d := elapsed(w, func() { w.Load(ctx, "r") }); d != 0 {
			t.Errorf("log_load took %v under a fixed-0 latency", d)
		}
		none, _ := profile.Load("none")
		wn := profile.Wrap(m, none, 1)
		if d := elapsed(wn, func() { wn.GetRun(ctx, "r") }); d != 0 {
			t.Errorf("run_get took %v under the none profile", d)
		}
	})
}

// TestLatencyIsRealOnMem: outside a bubble the decorator really sleeps.
func TestLatencyIsRealOnMem(t *testing.T) {
	ctx := context.Background()
	w := profile.Wrap(newMem(t, world.Options{}), mustParse(t, "ops: {run_create: {latency: 3ms}}"), 1)
	start := time.Now()
	for i := range 5 {
		if err := w.CreateRun(ctx, world.Run{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 15*ms {
		t.Errorf("5 calls of 3ms took %v", d)
	}
}

// TestSameSeedSameDraws: the same seed and call order replay the same
// latencies and faults; another seed does not.
func TestSameSeedSameDraws(t *testing.T) {
	p := mustParse(t, `ops: {default: {latency: {dist: lognormal, median: 10ms, p99: 50ms}, transient: 20%}}`)
	trace := func(seed int64) []string {
		var out []string
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			w := profile.Wrap(newMem(t, world.Options{}), p, seed)
			for i := range 50 {
				var err error
				d := elapsed(w, func() { err = w.CreateRun(ctx, world.Run{ID: fmt.Sprint(i)}) })
				out = append(out, fmt.Sprintf("%v %v", d, err != nil))
			}
		})
		return out
	}
	a, b, c := trace(7), trace(7), trace(8)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 twice differs:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Error("seeds 7 and 8 drew the same")
	}
}

// TestTransientRate: over 4000 appends at 5%, the injected failure count is
// within 5 standard deviations of 200, each failure is a transient
// FaultError, and a failed write did not happen.
func TestTransientRate(t *testing.T) {
	ctx := context.Background()
	m := newMem(t, world.Options{})
	w := profile.Wrap(m, mustParse(t, "ops: {step_created: {transient: 5%}}"), 3)
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	failed := 0
	for i := range n {
		_, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: fmt.Sprint("s", i)}, world.Precondition{})
		if err != nil {
			var fe *profile.FaultError
			if !errors.Is(err, world.ErrTransient) || !errors.As(err, &fe) || fe.Op != "step_created" || fe.Profile != "test" {
				t.Fatalf("error %v, want a transient FaultError for step_created", err)
			}
			failed++
		}
	}
	if failed < 200-5*14 || failed > 200+5*14 { // sd = sqrt(4000·0.05·0.95) ≈ 13.8
		t.Errorf("%d of %d failed, want ~200", failed, n)
	}
	events, err := m.Load(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(events) - 1; got != n-failed { // minus run_created
		t.Errorf("%d step_created in the log, want %d (failed writes must not happen)", got, n-failed)
	}
	// Other ops are untouched.
	for range 100 {
		if _, err := w.GetRun(ctx, "r"); err != nil {
			t.Fatalf("run_get failed: %v", err)
		}
	}
}

// probe is the mem world with run_get and log_load instrumented: each call
// counts itself in flight and takes 1 ms on the runtime, so calls the
// decorator lets through at the same time overlap.
type probe struct {
	*mem.World
	mu        sync.Mutex
	live, max int
}

func (p *probe) enter() {
	p.mu.Lock()
	p.live++
	p.max = max(p.max, p.live)
	p.mu.Unlock()
	p.Runtime().Sleep(context.Background(), time.Millisecond)
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
}

func (p *probe) GetRun(ctx context.Context, id string) (world.Run, error) {
	p.enter()
	return p.World.GetRun(ctx, id)
}

func (p *probe) Load(ctx context.Context, id string) ([]world.Event, error) {
	p.enter()
	return p.World.Load(ctx, id)
}

// TestCapacityLimitsConcurrency: at most K calls of a capacity-limited op
// (or of a group) are inside the inner world at once; the rest queue.
func TestCapacityLimitsConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		mixed      bool // half the calls are log loads
		want       int
	}{
		{"no limit", "ops: {run_get: {latency: 5ms}}", false, 60},
		{"op capacity", "ops: {run_get: {latency: 5ms, capacity: 3}}", false, 3},
		{"group capacity", "ops: {default: {latency: 5ms}}\ngroups: {reads: {ops: [run_get, log_load], capacity: 4}}", true, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				pr := &probe{World: newMem(t, world.Options{})}
				w := profile.Wrap(pr, mustParse(t, tt.yaml), 1)
				if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
					t.Fatal(err)
				}
				g := w.Runtime().NewGroup()
				for i := range 60 {
					g.Go(func() error {
						if !tt.mixed || i%2 == 0 {
							_, err := w.GetRun(ctx, "r")
							return err
						}
						_, err := w.Load(ctx, "r")
						return err
					})
				}
				d := elapsed(w, func() {
					if err := g.Wait(); err != nil {
						t.Error(err)
					}
				})
				if pr.max != tt.want {
					t.Errorf("%d calls in flight at most, want %d", pr.max, tt.want)
				}
				// The permit is held through the latency and the call:
				// 60 calls of 6 ms through K permits take 60/K rounds.
				if tt.want < 60 {
					if rounds := (60 + tt.want - 1) / tt.want; d != time.Duration(rounds)*6*ms {
						t.Errorf("took %v, want %d rounds of 6ms", d, rounds)
					}
				}
			})
		})
	}
}

// TestPerEventLoadCost: a log's load time grows by per_event per event.
func TestPerEventLoadCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMem(t, world.Options{})
		w := profile.Wrap(m, mustParse(t, "ops: {log_load: {latency: 20ms, per_event: 50us}}"), 1)
		for _, n := range []int{1, 64, 256, 1024} {
			id := fmt.Sprint("run", n)
			m.CreateRun(ctx, world.Run{ID: id})
			for i := 1; i < n; i++ {
				m.Append(ctx, id, world.Event{Kind: world.StepCreated, Entity: fmt.Sprint(i)}, world.Precondition{})
			}
			var events []world.Event
			d := elapsed(w, func() { events, _ = w.Load(ctx, id) })
			if want := 20*ms + time.Duration(n)*50*time.Microsecond; len(events) != n || d != want {
				t.Errorf("%d events took %v, want %v", len(events), d, want)
			}
		}
		// A failed load (unknown run) pays no per-event cost.
		d := elapsed(w, func() {
			if _, err := w.Load(ctx, "nope"); !errors.Is(err, world.ErrNotFound) {
				t.Errorf("Load(nope) error %v", err)
			}
		})
		if d != 20*ms {
			t.Errorf("failed load took %v", d)
		}
	})
}

// TestDeliveryLatencyAndFaults: deliver latency passes before the handler
// runs; a failed delivery does not run the handler and the inner world
// retries it (attempt+1 with redeliver), so every message is still handled
// exactly once.
func TestDeliveryLatencyAndFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMem(t, world.Options{RetryStyle: world.Redeliver, RetryDelay: 5 * ms, VisibilityTimeout: time.Second})
		w := profile.Wrap(m, mustParse(t, "ops: {deliver: {latency: 30ms, transient: 30%}, publish: {latency: 10ms}}"), 5)
		rt := w.Runtime()
		var mu sync.Mutex
		handled := map[string]int{}
		retried := 0
		var first time.Duration
		sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, func(ctx context.Context, d world.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			if len(handled) == 0 {
				first = rt.Now()
			}
			handled[d.ID]++
			if d.Attempt > 1 {
				retried++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		start := rt.Now()
		const n = 40
		for i := range n {
			if _, err := w.Publish(ctx, world.Message{ID: fmt.Sprint(i)}, world.PublishOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Publishing took n×10 ms, and the first handler ran at least 10 ms
		// (publish) + 30 ms (deliver) after the start.
		for {
			mu.Lock()
			done := len(handled) == n
			mu.Unlock()
			if done {
				break
			}
			rt.Sleep(ctx, 10*ms)
		}
		if err := sub.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if first-start < 40*ms {
			t.Errorf("first handler ran %v after the first publish began, want >= 40ms", first-start)
		}
		for id, c := range handled {
			if c != 1 {
				t.Errorf("message %s handled %d times", id, c)
			}
		}
		if retried == 0 {
			t.Error("no delivery was retried at a 30% fault rate")
		}
	})
}

// TestDeliverConcurrency: a profile's deliver concurrency is offered in the
// wrapped world's capabilities (the engine asks for it); Consume still runs
// what the consumer asks for.
func TestDeliverConcurrency(t *testing.T) {
	m := newMem(t, world.Options{})
	if c := profile.Wrap(m, mustParse(t, "ops: {deliver: {latency: 1ms, concurrency: 96}}"), 1).Capabilities().Concurrency; c != 96 {
		t.Errorf("capabilities offer %d handlers at once, want the profile's 96", c)
	}
	if c := profile.Wrap(m, mustParse(t, "ops: {deliver: {latency: 1ms}}"), 1).Capabilities().Concurrency; c != 0 {
		t.Errorf("capabilities offer %d handlers at once without a profile concurrency, want 0 (the consumer's)", c)
	}
}

// TestPublishFaultPublishesNothing: a failed publish did not enqueue.
func TestPublishFaultPublishesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMem(t, world.Options{})
		w := profile.Wrap(m, mustParse(t, "ops: {publish: {transient: 100%}}"), 1)
		if _, err := w.Publish(ctx, world.Message{ID: "a"}, world.PublishOptions{}); !errors.Is(err, world.ErrTransient) {
			t.Fatalf("publish error %v, want transient", err)
		}
		// The ID was never published: the bare world accepts it as new.
		if dup, err := m.Publish(ctx, world.Message{ID: "a"}, world.PublishOptions{}); err != nil || dup {
			t.Errorf("bare publish after the failed one: duplicate %v, error %v", dup, err)
		}
	})
}

// TestCancelWhileQueued: a call waiting for capacity or sleeping its latency
// returns the context's error.
func TestCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := profile.Wrap(newMem(t, world.Options{}), mustParse(t, "ops: {run_list: {latency: 1s, capacity: 1}}"), 1)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*ms)
		defer cancel()
		g := w.Runtime().NewGroup()
		errs := make([]error, 2)
		for i := range 2 {
			g.Go(func() error { _, errs[i] = w.ListRuns(ctx); return nil })
		}
		g.Wait()
		ok, cancelled := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, context.DeadlineExceeded):
				cancelled++
			}
		}
		if ok != 1 || cancelled != 1 {
			t.Errorf("errors %v, want one success and one deadline", errs)
		}
	})
}

// TestConformance: the decorator keeps the world contract on mem under the
// lan profile, with real sleeps on every wrapped path (TestConformanceSimCloud
// does the same in virtual time under cloud).
func TestConformance(t *testing.T) {
	lan, err := profile.Load("lan")
	if err != nil {
		t.Fatal(err)
	}
	worldtest.Run(t, func(t *testing.T, opts world.Options) worldtest.Harness {
		w := profile.Wrap(newMem(t, opts), lan, 1)
		return worldtest.Harness{World: w, Run: worldtest.Direct}
	})
}
