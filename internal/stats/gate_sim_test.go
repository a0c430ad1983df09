//go:build acceptance

// The acceptance checks of issue 7 on real sweeps: the reference engine on
// the sim world with the hand-set cloud-v1 profile, in virtual time. Slow (about a
// hundred sweeps), so behind a build tag:
//
//	go test -tags acceptance -run SimAcceptance -v -timeout 1h ./internal/stats/   (make acceptance)
//
// -pairs N runs fewer pairs (a smoke test; the thresholds scale).

package stats_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/results"
)

// simSweep runs the acceptance matrix: fan-out at 20, 64 and 256 branches
// for the resilient and pending-count versions, 30 runs a cell, on the sim
// world with the cloud-v1 profile and faults (profile overrides) on top.
func simSweep(t *testing.T, seed int64, faults string) *results.File {
	t.Helper()
	p := sweep.DefaultPlan()
	p.Worlds = []string{"sim"}
	p.Profiles = []string{"cloud-v1"}
	p.Faults = faults
	p.Branches = []int{20, 64, 256}
	p.Versions = nil
	for _, name := range []string{"resilient", "pending-count"} {
		v, err := engine.LookupVersion(name)
		if err != nil {
			t.Fatal(err)
		}
		p.Versions = append(p.Versions, v)
	}
	p.Switches = []engine.SwitchSet{{}}
	p.Reps = 30
	p.CellTimeout = 30 * time.Minute // virtual: 30 sequential runs of a 256-branch fan-out fit
	p.Seed = seed
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := sweep.Run(context.Background(), sweep.Config{Plan: p, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := out.File
	if faults != "" {
		// The overrides stand in for a code change that slows one world
		// operation: label the cells as the base's so they are compared.
		for i := range f.Cells {
			f.Cells[i].Profile = "cloud-v1"
		}
	}
	return f
}

var pairsFlag = flag.Int("pairs", 20, "sweep pairs of the sim acceptance test")

func TestSimAcceptance(t *testing.T) {
	pairs := *pairsFlag
	// 20% and 2% more latency on every append (step_created, step_started,
	// step_completed, ...): the cloud-v1 profile's default op, lognormal
	// with median 25 ms and p99 75 ms.
	slower := map[string]string{
		"+20%": "default.latency=lognormal:30ms:90ms",
		"+2%":  "default.latency=lognormal:25.5ms:76.5ms",
	}
	aaPass := 0
	abFail := map[string]int{}
	for i := range pairs {
		base := simSweep(t, int64(1000+2*i), "")
		head := simSweep(t, int64(1001+2*i), "")
		rep, err := stats.Gate(head, base, stats.DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Passed() {
			aaPass++
		} else {
			t.Logf("A/A pair %d: %v", i, rep.Err())
		}
		for name, faults := range slower {
			slow := simSweep(t, int64(1001+2*i), faults)
			rep, err := stats.Gate(slow, base, stats.DefaultRules())
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed() {
				abFail[name]++
				var moved []string
				for _, f := range rep.Failed() {
					moved = append(moved, fmt.Sprintf("%s.%s on %s", f.Rule.Metric, f.Rule.Stat, f.Check.Cell))
				}
				t.Logf("A/B %s pair %d fails: %v", name, i, moved)
			}
		}
	}
	t.Logf("A/A: %d of %d pass; A/B +20%%: %d of %d fail; A/B +2%%: %d of %d fail",
		aaPass, pairs, abFail["+20%"], pairs, abFail["+2%"], pairs)
	// At most one pair in 20 may go the wrong way.
	slack := pairs / 20
	if aaPass < pairs-slack {
		t.Errorf("A/A: %d of %d pairs pass, want at least %d", aaPass, pairs, pairs-slack)
	}
	if abFail["+20%"] < pairs-slack {
		t.Errorf("A/B +20%%: %d of %d pairs fail, want at least %d", abFail["+20%"], pairs, pairs-slack)
	}
	if abFail["+2%"] > slack {
		t.Errorf("A/B +2%%: %d of %d pairs fail, want at most %d", abFail["+2%"], pairs, slack)
	}
}
