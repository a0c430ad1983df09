package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
)

// TestEveryScenarioOnEveryWorld runs the whole scenario book through the
// real binary on each world, every version: every cell completes without
// errors or stalls and carries exactly the metrics its scenario declares.
func TestEveryScenarioOnEveryWorld(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole book on three worlds: not in -short")
	}
	dir := t.TempDir()
	r := durabench(t, dir, "sweep", "--scenario", "step,hook-step,sequential,stream-latency,stream-overhead,race,payload,stream-replay,stream-sizes,stream-pipeline",
		"--world", "mem,nats,sim", "--versions", "all", "--switches", "none", "--reps", "2", "--warmup", "0",
		"--option", "steps=12", "--option", "chunks=15", "--option", "speed=8", "--option", "sizes=64/16KB", "--branches", "4",
		"--stall-threshold", "5s", // a redelivery (30 s) is a stall; a busy shared machine's 10× spread between two runs is not
		"--quiet", "--out", "book")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := results.Read(filepath.Join(dir, "book", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 * 3 * 6; len(f.Cells) != want { // scenarios × worlds × every built-in version
		t.Fatalf("%d cells, want %d", len(f.Cells), want)
	}
	for _, c := range f.Cells {
		id := c.Scenario + "/" + c.World + "/" + c.Version
		if c.Errors != 0 || c.Stalls != 0 || c.Runs != 2 {
			t.Errorf("%s: runs %d, errors %d, stalls %d", id, c.Runs, c.Errors, c.Stalls)
		}
		s, err := scenarios.Get(c.Scenario)
		if err != nil {
			t.Fatal(err)
		}
		for name := range c.Metrics {
			if !slices.Contains(s.Metrics, name) {
				t.Errorf("%s: metric %s is not one the scenario declares", id, name)
			}
		}
		for _, name := range s.Metrics {
			if _, ok := c.Metrics[name]; !ok && name != "stso_queue" && // 12 steps stay inside the inline budget
				(name != "crtt_late" || (c.Scenario != "stream-sizes" && c.Scenario != "stream-pipeline")) { // 15 chunks end before chunk 21
				t.Errorf("%s: declared metric %s missing", id, name)
			}
		}
		if (c.Scenario == "stream-replay") != (c.CadenceSHA256 != "") {
			t.Errorf("%s: cadence_sha256 %q", id, c.CadenceSHA256)
		}
	}
}
