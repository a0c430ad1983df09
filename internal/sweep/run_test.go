package sweep

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/durabench/durabench/results"
)

// TestSimSweepDeterministic: the same plan and seed on the sim world give
// identical cells, so a resumed or repeated sweep reproduces its numbers.
func TestSimSweepDeterministic(t *testing.T) {
	run := func() []results.Cell {
		plan, err := planFrom(t, "--world", "sim", "--profile", "lan", "--branches", "8,32",
			"--versions", "baseline,resilient-inband", "--reps", "4", "--seed", "11")
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out")
		res, err := Run(context.Background(), Config{Plan: plan, Out: out})
		if err != nil {
			t.Fatal(err)
		}
		if !res.File.VirtualTime || len(res.File.Cells) != 8 {
			t.Fatalf("virtual %v, %d cells", res.File.VirtualTime, len(res.File.Cells))
		}
		back, err := results.Read(res.ResultsPath)
		if err != nil {
			t.Fatal(err)
		}
		return back.Cells
	}
	a, b := run(), run()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two sweeps with one seed differ:\n%s\n%s", ja, jb)
	}
}
