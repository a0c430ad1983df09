//go:build acceptance

// The acceptance checks of issue 7 on real sweeps: the reference engine on
// the sim world with the cloud profile, in virtual time. Slow (about a
// hundred sweeps), so behind a build tag:
//
//	go test -tags acceptance -run SimAcceptance -v ./results/

package results_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/sweep"
)

// simSweep runs the acceptance matrix: fan-out at 20, 64 and 256 branches
// for the resilient and pending-count versions, 30 runs a cell, on the sim
// world with the cloud profile and faults (profile overrides) on top.
func simSweep(t *testing.T, seed int64, faults string) *results.File {
	t.Helper()
	p := sweep.DefaultPlan()
	p.Worlds = []string{"sim"}
	p.Profiles = []string{"cloud"}
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
			f.Cells[i].Profile = "cloud"
		}
	}
	return f
}

func TestSimAcceptance(t *testing.T) {
	const pairs = 20
	// 20% and 2% more latency on every append (step_created, step_started,
	// step_completed, ...): the cloud profile's default op, lognormal with
	// median 25 ms and p99 75 ms.
	slower := map[string]string{
		"+20%": "default.latency=lognormal:30ms:90ms",
		"+2%":  "default.latency=lognormal:25.5ms:76.5ms",
	}
	aaPass := 0
	abFail := map[string]int{}
	for i := range pairs {
		base := simSweep(t, int64(1000+2*i), "")
		head := simSweep(t, int64(1001+2*i), "")
		rep, err := results.Gate(head, base, results.DefaultRules())
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
			rep, err := results.Gate(slow, base, results.DefaultRules())
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
	if aaPass < 19 {
		t.Errorf("A/A: %d of %d pairs pass, want at least 19", aaPass, pairs)
	}
	if abFail["+20%"] < 19 {
		t.Errorf("A/B +20%%: %d of %d pairs fail, want at least 19", abFail["+20%"], pairs)
	}
	if abFail["+2%"] > 1 {
		t.Errorf("A/B +2%%: %d of %d pairs fail, want at most 1", abFail["+2%"], pairs)
	}
}
