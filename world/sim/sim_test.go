package sim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/sim"
	"github.com/durabench/durabench/world/worldtest"
)

func factory(log sim.LogModel) worldtest.Factory {
	return func(t *testing.T, opts world.Options) worldtest.Harness {
		w := sim.New(sim.Config{Options: opts, Log: log, Seed: 1})
		t.Cleanup(func() { w.Close() })
		return worldtest.Harness{World: w, Run: func(fn func(ctx context.Context)) {
			if err := w.Run(context.Background(), fn); err != nil {
				t.Errorf("sim run: %v", err)
			}
		}}
	}
}

func TestConformanceAppendOnly(t *testing.T)  { worldtest.Run(t, factory(sim.AppendOnly)) }
func TestConformanceMintOrdered(t *testing.T) { worldtest.Run(t, factory(sim.MintOrdered)) }

// jitter is a latency model with spread, so interleavings depend on the seed.
func jitter(op world.Op, rng *rand.Rand) time.Duration {
	return time.Millisecond + time.Duration(rng.Int63n(int64(20*time.Millisecond)))
}

// workload exercises the log, the queue (with failures and retries), the
// runtime primitives and streams on a world, from one root task.
func workload(ctx context.Context, w *sim.World) {
	rt := w.Runtime()
	_ = w.CreateRun(ctx, world.Run{ID: "r"})
	_, _ = w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{})
	done := rt.NewFuture()
	left := 16
	sub, _ := w.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, func(ctx context.Context, d world.Delivery) error {
		if d.Attempt == 1 && d.Body[0]%3 == 0 {
			return errors.New("flaky")
		}
		if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCompleted, Entity: d.ID, ID: "done-" + d.ID}, world.Precondition{}); err != nil {
			return err
		}
		if _, err := w.Load(ctx, "r"); err != nil {
			return err
		}
		left--
		if left == 0 {
			done.Resolve()
		}
		return nil
	})
	g := rt.NewGroup()
	for i := range 16 {
		g.Go(func() error {
			id := fmt.Sprintf("s%d", i)
			if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: id}, world.Precondition{}); err != nil {
				return err
			}
			_, err := w.Publish(ctx, world.Message{ID: id, Run: "r", Body: []byte{byte(i)}}, world.PublishOptions{})
			return err
		})
	}
	_ = g.Wait()
	done.Wait(ctx, time.Minute)
	_ = sub.Stop(ctx)
	_, _ = w.Append(ctx, "r", world.Event{Kind: world.RunCompleted}, world.Precondition{})
}

func traceOf(t *testing.T, log sim.LogModel, seed int64) []byte {
	t.Helper()
	tr := sim.NewTrace()
	w := sim.New(sim.Config{Log: log, Seed: seed, Latency: jitter, Trace: tr,
		Options: world.Options{VisibilityTimeout: time.Second}})
	defer w.Close()
	if err := w.Run(context.Background(), func(ctx context.Context) { workload(ctx, w) }); err != nil {
		t.Fatalf("run: %v", err)
	}
	var b bytes.Buffer
	if _, err := tr.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDeterminism: the same seed gives byte-identical traces; another seed
// gives another interleaving.
func TestDeterminism(t *testing.T) {
	for _, log := range sim.LogModels() {
		a, b := traceOf(t, log, 7), traceOf(t, log, 7)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two runs with seed 7 differ:\n%s\n---\n%s", log, a, b)
		}
		if c := traceOf(t, log, 8); bytes.Equal(a, c) {
			t.Fatalf("%s: seeds 7 and 8 gave the same trace", log)
		}
		if !bytes.Contains(a, []byte("run_completed")) || !bytes.Contains(a, []byte("nak")) {
			t.Fatalf("%s: trace misses the workload's end or its retries:\n%s", log, a)
		}
	}
}

// TestSchedulerOrder: tasks resume in (wake time, sequence) order and the
// clock jumps to each wake time.
func TestSchedulerOrder(t *testing.T) {
	w := sim.New(sim.Config{})
	defer w.Close()
	rt := w.Runtime()
	var got []string
	err := w.Run(context.Background(), func(ctx context.Context) {
		g := rt.NewGroup()
		for i, d := range []time.Duration{30, 10, 20, 10} {
			g.Go(func() error {
				_ = rt.Sleep(ctx, d*time.Millisecond)
				got = append(got, fmt.Sprintf("%d@%v", i, rt.Now()))
				return nil
			})
		}
		_ = g.Wait()
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1@10ms 3@10ms 2@20ms 0@30ms"; strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

// TestDeadlock: a root task waiting for a future nobody resolves ends the
// run with ErrDeadlock instead of hanging; the world stays usable.
func TestDeadlock(t *testing.T) {
	w := sim.New(sim.Config{})
	defer w.Close()
	f := w.Runtime().NewFuture()
	err := w.Run(context.Background(), func(ctx context.Context) { f.Wait(ctx, 0) })
	if !errors.Is(err, sim.ErrDeadlock) {
		t.Fatalf("err = %v, want ErrDeadlock", err)
	}
	if err := w.CreateRun(context.Background(), world.Run{ID: "x"}); err != nil {
		t.Fatalf("world unusable after a deadlock: %v", err)
	}
}

// TestFutureTimeout: Wait returns false after its virtual timeout, and
// true when resolved first.
func TestFutureTimeout(t *testing.T) {
	w := sim.New(sim.Config{})
	defer w.Close()
	rt := w.Runtime()
	err := w.Run(context.Background(), func(ctx context.Context) {
		f := rt.NewFuture()
		start := rt.Now()
		if f.Wait(ctx, 5*time.Second) {
			t.Errorf("unresolved future reported resolved")
		}
		if d := rt.Now() - start; d != 5*time.Second {
			t.Errorf("timeout after %v, want 5s", d)
		}
		rt.Go(func() { _ = rt.Sleep(ctx, time.Second); f.Resolve() })
		start = rt.Now()
		if !f.Wait(ctx, time.Hour) || rt.Now()-start != time.Second {
			t.Errorf("resolved future: waited %v", rt.Now()-start)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSemaphore: at most n holders; permits are handed over FIFO.
func TestSemaphore(t *testing.T) {
	w := sim.New(sim.Config{})
	defer w.Close()
	rt := w.Runtime()
	var order []int
	live, peak := 0, 0
	err := w.Run(context.Background(), func(ctx context.Context) {
		sem := rt.NewSemaphore(2)
		g := rt.NewGroup()
		for i := range 6 {
			g.Go(func() error {
				if err := sem.Acquire(ctx); err != nil {
					return err
				}
				defer sem.Release()
				live++
				peak = max(peak, live)
				order = append(order, i)
				_ = rt.Sleep(ctx, time.Millisecond)
				live--
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if peak != 2 || fmt.Sprint(order) != "[0 1 2 3 4 5]" {
		t.Fatalf("peak %d order %v", peak, order)
	}
}

// TestMintOrderedGap: with mint-ordered positions, a slow append minted
// first commits after a fast one minted later: a reader sees position 3
// while 2 is missing, and Pending counts only committed events at or
// before the appended position. Append-only never shows the gap.
func TestMintOrderedGap(t *testing.T) {
	for _, tc := range []struct {
		log         sim.LogModel
		sawGap      bool
		pendA, pend int
	}{
		{sim.AppendOnly, false, 0, 0},
		{sim.MintOrdered, true, 1, 1},
	} {
		t.Run(string(tc.log), func(t *testing.T) {
			calls := 0
			lat := func(op world.Op, _ *rand.Rand) time.Duration {
				if op != world.AppendOp(world.StepCompleted) {
					return time.Millisecond
				}
				calls++
				if calls == 1 {
					return 50 * time.Millisecond // a's completion: issued first, slow
				}
				return 10 * time.Millisecond
			}
			w := sim.New(sim.Config{Log: tc.log, Latency: lat})
			defer w.Close()
			rt := w.Runtime()
			var resA, resB world.AppendResult
			var between []world.Event
			err := w.Run(context.Background(), func(ctx context.Context) {
				_ = w.CreateRun(ctx, world.Run{ID: "r"})
				for _, s := range []string{"a", "b"} {
					if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: s}, world.Precondition{}); err != nil {
						t.Error(err)
						return
					}
				}
				g := rt.NewGroup()
				g.Go(func() (err error) {
					resA, err = w.Append(ctx, "r", world.Event{Kind: world.StepCompleted, Entity: "a"}, world.Precondition{})
					return err
				})
				g.Go(func() (err error) {
					_ = rt.Sleep(ctx, time.Millisecond)
					resB, err = w.Append(ctx, "r", world.Event{Kind: world.StepCompleted, Entity: "b"}, world.Precondition{})
					if err == nil {
						between, err = w.Load(ctx, "r")
					}
					return err
				})
				if err := g.Wait(); err != nil {
					t.Error(err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			gap := false
			for i, ev := range between {
				if ev.Pos != int64(i+1) {
					gap = true
				}
			}
			if gap != tc.sawGap {
				t.Errorf("reader saw %v; gap = %v, want %v", between, gap, tc.sawGap)
			}
			if tc.log == sim.MintOrdered {
				// a minted 4 and b minted 5; b committed first.
				if resA.Pos != 4 || resB.Pos != 5 || resA.Pending != tc.pendA || resB.Pending != tc.pend {
					t.Errorf("a %+v, b %+v: want a at 4 and b at 5, each seeing the other pending", resA, resB)
				}
			} else if resB.Pos != 4 || resA.Pos != 5 || resB.Pending != 1 || resA.Pending != 0 {
				t.Errorf("a %+v, b %+v: want b at 4 (pending 1), a at 5 (pending 0)", resA, resB)
			}
		})
	}
}

// TestOutsideCalls: world calls made while no Run drives the world run as
// a one-shot Run, and virtual time moves.
func TestOutsideCalls(t *testing.T) {
	w := sim.New(sim.Config{})
	defer w.Close()
	ctx := context.Background()
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	evs, err := w.Load(ctx, "r")
	if err != nil || len(evs) != 1 || w.Now() != 2*sim.DefaultLatency {
		t.Fatalf("Load = %v, %v at %v", evs, err, w.Now())
	}
}

// TestCloseEndsTasks: Close ends parked tasks (their deferred calls run)
// and later calls fail with ErrClosed.
func TestCloseEndsTasks(t *testing.T) {
	w := sim.New(sim.Config{})
	rt := w.Runtime()
	deferred := 0
	err := w.Run(context.Background(), func(ctx context.Context) {
		for range 3 {
			rt.Go(func() {
				defer func() { deferred++ }()
				_ = rt.Sleep(ctx, time.Hour)
			})
		}
		_ = rt.Sleep(ctx, time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if deferred != 3 {
		t.Fatalf("%d tasks ran their defers, want 3", deferred)
	}
	if err := w.CreateRun(context.Background(), world.Run{ID: "r"}); !errors.Is(err, world.ErrClosed) {
		t.Fatalf("CreateRun after Close: %v", err)
	}
}

// TestRunStops: Run returns ErrTimeLimit past Config.RunLimit, ErrTaskPanic
// when a task panics, and ctx.Err() for a cancelled context.
func TestRunStops(t *testing.T) {
	w := sim.New(sim.Config{RunLimit: time.Hour})
	defer w.Close()
	rt := w.Runtime()
	err := w.Run(context.Background(), func(ctx context.Context) {
		for {
			_ = rt.Sleep(ctx, time.Minute)
		}
	})
	if !errors.Is(err, sim.ErrTimeLimit) || w.Now() > time.Hour {
		t.Fatalf("err = %v at %v, want ErrTimeLimit within the hour", err, w.Now())
	}

	p := sim.New(sim.Config{})
	defer p.Close()
	err = p.Run(context.Background(), func(ctx context.Context) {
		p.Runtime().Go(func() { panic("boom") })
		_ = p.Runtime().Sleep(ctx, time.Second)
	})
	if !errors.Is(err, sim.ErrTaskPanic) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want ErrTaskPanic with the panic value", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := sim.New(sim.Config{})
	defer c.Close()
	if err := c.Run(ctx, func(context.Context) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
