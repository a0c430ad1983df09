package profile_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/sim"
	"github.com/durabench/durabench/world/worldtest"
)

// On the sim world the decorator sleeps in virtual time; the sim's own
// per-call latency is set to zero so the profile is the only cost.
func noLatency(world.Op, *rand.Rand) time.Duration { return 0 }

func simHarness(t *testing.T, opts world.Options, p *profile.Profile, seed int64) (worldtest.Harness, *sim.World) {
	s := sim.New(sim.Config{Options: opts, Seed: seed, Latency: noLatency})
	t.Cleanup(func() { s.Close() })
	w := profile.Wrap(s, p, seed)
	return worldtest.Harness{World: w, Run: func(fn func(ctx context.Context)) {
		if err := s.Run(context.Background(), fn); err != nil {
			t.Errorf("sim run: %v", err)
		}
	}}, s
}

// TestConformanceSimCloud: the decorator keeps the contract in virtual time
// under the cloud profile (tens of ms per call, capacity groups).
func TestConformanceSimCloud(t *testing.T) {
	cloud, err := profile.Load("cloud")
	if err != nil {
		t.Fatal(err)
	}
	worldtest.Run(t, func(t *testing.T, opts world.Options) worldtest.Harness {
		h, _ := simHarness(t, opts, cloud, 1)
		return h
	})
}

// fanoutLoads models the read side of an N-branch fan-out whose every
// completer loads the run's log: a log of 3N+2 events, N concurrent loads.
// It returns the virtual time until the last load finished.
func fanoutLoads(t *testing.T, p *profile.Profile, n int, seed int64) time.Duration {
	h, _ := simHarness(t, world.Options{}, p, seed)
	w := h.World
	var took time.Duration
	h.Run(func(ctx context.Context) {
		if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
			t.Fatal(err)
		}
		for i := range 3*n + 1 {
			ev := world.Event{Kind: world.StepCreated, Entity: fmt.Sprint(i)}
			if _, err := w.(*profile.World).Unwrap().Append(ctx, "r", ev, world.Precondition{}); err != nil {
				t.Fatal(err)
			}
		}
		start := w.Runtime().Now()
		g := w.Runtime().NewGroup()
		for range n {
			g.Go(func() error { _, err := w.Load(ctx, "r"); return err })
		}
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
		took = w.Runtime().Now() - start
	})
	return took
}

// TestCloudLoadCliff: under cloud, N concurrent loads of an O(N) log take
// O(N²) time once the read pool is saturated — the cliff at 256 branches.
// Virtual time, so the figures are exact and replay with the seed.
func TestCloudLoadCliff(t *testing.T) {
	cloud, err := profile.Load("cloud")
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for _, n := range []int{20, 64, 256} {
		took = append(took, fanoutLoads(t, cloud, n, 1))
		t.Logf("cloud: %3d concurrent loads of a %3d-event log: last done after %v", n, 3*n+2, took[len(took)-1])
	}
	// 64→256 is 4x the branches; the loads take well over 4x as long.
	if took[2] < 5*took[1] {
		t.Errorf("256 branches %v vs 64 branches %v: want superlinear growth", took[2], took[1])
	}
	if again := fanoutLoads(t, cloud, 64, 1); again != took[1] {
		t.Errorf("same seed replayed %v, then %v", took[1], again)
	}
}

// TestSimDeterminism: on the sim world the same seed replays the same
// virtual timestamps through the decorator, including queue deliveries.
func TestSimDeterminism(t *testing.T) {
	p, err := profile.ApplyOverrides(mustLoad(t, "cloud"), "default.transient=10%,deliver.transient=10%")
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed int64) []string {
		h, _ := simHarness(t, world.Options{RetryDelay: 5 * ms}, p, seed)
		w := h.World
		var out []string
		h.Run(func(ctx context.Context) {
			rt := w.Runtime()
			done := rt.NewFuture()
			handled := 0
			sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, func(ctx context.Context, d world.Delivery) error {
				_, err := w.Append(ctx, "r", world.Event{Kind: world.StepStarted, Entity: d.ID, ID: "start-" + d.ID}, world.Precondition{})
				out = append(out, fmt.Sprintf("%v deliver %s#%d err=%v", rt.Now(), d.ID, d.Attempt, err != nil))
				if err != nil {
					return err
				}
				if handled++; handled == 16 {
					done.Resolve()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for w.CreateRun(ctx, world.Run{ID: "r"}) != nil {
			}
			g := rt.NewGroup()
			for i := range 16 {
				id := fmt.Sprint("s", i)
				g.Go(func() error {
					for {
						_, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: id, ID: "create-" + id}, world.Precondition{})
						out = append(out, fmt.Sprintf("%v create %s err=%v", rt.Now(), id, err != nil))
						if err == nil {
							break
						}
					}
					for {
						if _, err := w.Publish(ctx, world.Message{ID: id, Run: "r"}, world.PublishOptions{}); err == nil {
							return nil
						}
					}
				})
			}
			g.Wait()
			done.Wait(ctx, time.Minute)
			sub.Stop(ctx)
		})
		return out
	}
	a, b, c := run(11), run(11), run(12)
	if len(a) < 32 || !slices.Equal(a, b) {
		t.Errorf("seed 11 twice:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Error("seeds 11 and 12 gave the same trace")
	}
}

func mustLoad(t *testing.T, name string) *profile.Profile {
	t.Helper()
	p, err := profile.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
