package simcheck

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/sim"
)

func versions(t *testing.T, names ...string) []engine.Version {
	t.Helper()
	var out []engine.Version
	for _, n := range names {
		v, err := engine.LookupVersion(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// faults is the bare profile with overrides (only faults, no latency).
func faults(t *testing.T, overrides string) *profile.Profile {
	t.Helper()
	none, err := profile.Load("none")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.ApplyOverrides(none, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFreshRetryStall reproduces the reference's 300 s stall in virtual
// time: with transient step_created failures and a queue that retries with a
// fresh message (attempt back to 1), the "resilient" version re-ensures a
// missing step only on attempt > 1, so its recovery waits for the visibility
// timeout; "resilient-inband" recovers in the same delivery.
func TestFreshRetryStall(t *testing.T) {
	faulty := faults(t, "step_created.transient=20%")
	const vt = 300 * time.Second
	sc, _ := LookupScenario("fanout-8")
	rep, err := Explore(context.Background(), Config{
		Seeds:         20,
		Logs:          []sim.LogModel{sim.AppendOnly},
		Scenarios:     []Scenario{sc},
		Versions:      versions(t, "resilient", "resilient-inband"),
		Options:       world.Options{RetryStyle: world.Fresh, VisibilityTimeout: vt},
		Wrap:          func(w world.World, seed int64) world.World { return profile.Wrap(w, faulty, seed) },
		FaultInjected: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Models[0]
	if len(m.Failures) != 0 {
		t.Fatalf("%d cases broke an invariant, first %s %v", len(m.Failures), m.Failures[0].Case, m.Failures[0].Violations)
	}
	stalls := map[string]int{}
	var worst = map[string]time.Duration{}
	for _, r := range m.Results {
		if r.TTC >= vt {
			stalls[r.Version]++
		}
		worst[r.Version] = max(worst[r.Version], r.TTC)
	}
	t.Logf("runs with TTC >= VT (%v): %v; worst TTC: %v", vt, stalls, worst)
	if stalls["resilient"] == 0 {
		t.Errorf("resilient: no run stalled for the visibility timeout")
	}
	if stalls["resilient-inband"] != 0 || worst["resilient-inband"] > time.Second {
		t.Errorf("resilient-inband: %d stalls, worst TTC %v; want none, well under a second", stalls["resilient-inband"], worst["resilient-inband"])
	}
}

// TestFanOutCliff reproduces the cliff at 256 branches under the cloud
// profile: versions whose every completer loads the whole log take
// super-linearly longer from 64 to 256 branches, while pending-count (only
// the last completer loads) stays close to linear.
func TestFanOutCliff(t *testing.T) {
	if testing.Short() {
		t.Skip("256-branch runs")
	}
	cloud, err := profile.Load("cloud")
	if err != nil {
		t.Fatal(err)
	}
	ttc := map[string]map[int]time.Duration{}
	for _, n := range []int{64, 256} {
		rep, err := Explore(context.Background(), Config{
			Seeds:     1,
			Logs:      []sim.LogModel{sim.AppendOnly},
			Scenarios: []Scenario{{Name: "fanout", Program: engine.FanOut(n)}},
			Versions:  versions(t, "runcontext", "pending-count"),
			Latency:   func(world.Op, *rand.Rand) time.Duration { return 0 }, // the profile is the latency
			Wrap:      func(w world.World, seed int64) world.World { return profile.Wrap(w, cloud, seed) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Models[0].Results {
			if !r.Finished {
				t.Fatalf("%s did not finish: %v", r.Case, r.Violations)
			}
			if ttc[r.Version] == nil {
				ttc[r.Version] = map[int]time.Duration{}
			}
			ttc[r.Version][n] = r.TTC
		}
	}
	t.Logf("TTC 64 → 256 branches: %v", ttc)
	growth := func(v string) float64 { return float64(ttc[v][256]) / float64(ttc[v][64]) }
	if g := growth("runcontext"); g < 4 {
		t.Errorf("runcontext: TTC grew %.1fx from 64 to 256 branches, want a super-linear cliff (>= 4x)", g)
	}
	if g := growth("pending-count"); g >= growth("runcontext") {
		t.Errorf("pending-count grew %.1fx, no better than runcontext's %.1fx", g, growth("runcontext"))
	}
}

// TestRunContextSkew reproduces the read amplification of one blocking
// runs.get per branch before its claim: under the cloud profile a 256-branch
// fan-out of resilient-inband starts its branches over a wider window than
// runcontext, whose step messages carry the run identity.
func TestRunContextSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("256-branch runs")
	}
	cloud, err := profile.Load("cloud")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Explore(context.Background(), Config{
		Seeds:     2,
		Logs:      []sim.LogModel{sim.AppendOnly},
		Scenarios: []Scenario{{Name: "fanout-256", Program: engine.FanOut(256)}},
		Versions:  versions(t, "resilient-inband", "runcontext"),
		Latency:   func(world.Op, *rand.Rand) time.Duration { return 0 },
		Wrap:      func(w world.World, seed int64) world.World { return profile.Wrap(w, cloud, seed) },
	})
	if err != nil {
		t.Fatal(err)
	}
	skew := map[string]time.Duration{}
	for _, r := range rep.Models[0].Results {
		if !r.Finished {
			t.Fatalf("%s did not finish: %v", r.Case, r.Violations)
		}
		skew[r.Version] = max(skew[r.Version], r.Skew)
	}
	t.Logf("worst skew at 256 branches: %v", skew)
	if skew["runcontext"] >= skew["resilient-inband"] {
		t.Errorf("runcontext skew %v not below resilient-inband's %v", skew["runcontext"], skew["resilient-inband"])
	}
}

// TestLongInvocationLosesNoRun: an orchestrator that keeps running inline
// steps past its delivery's visibility timeout has its message handed to a
// second consumer; when the first acks it and the second then fails (a
// transient step_created), nothing is left to retry and the run is lost.
// Every version stops inlining at half the visibility timeout, so a long
// sequence under faults and a short timeout completes in every case.
func TestLongInvocationLosesNoRun(t *testing.T) {
	faulty := faults(t, "step_created.transient=3%")
	rep, err := Explore(context.Background(), Config{
		Seeds:         10,
		Logs:          []sim.LogModel{sim.AppendOnly},
		Scenarios:     []Scenario{{"sequence-60", engine.Sequence(60)}},
		Versions:      engine.Versions(),
		Options:       world.Options{VisibilityTimeout: 300 * time.Millisecond},
		Timeout:       time.Minute, // a run takes ~3 s
		Wrap:          func(w world.World, seed int64) world.World { return profile.Wrap(w, faulty, seed) },
		FaultInjected: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Models[0]
	if m.Total != 10*len(engine.Versions()) {
		t.Fatalf("%d cases", m.Total)
	}
	for _, f := range m.Failures {
		t.Errorf("%s: %v", f.Case, f.Violations)
	}
}
