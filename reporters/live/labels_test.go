package live

import (
	"slices"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/registry"
)

// TestCellLabels: the built-in engine's cells are labelled target
// "reference"; another engine's cells by its --targets name, with no
// version, switches or world of durabench's (as results.json has them).
func TestCellLabels(t *testing.T) {
	fanout, err := scenarios.Get("fanout")
	if err != nil {
		t.Fatal(err)
	}
	mem, err := registry.Lookup("mem")
	if err != nil {
		t.Fatal(err)
	}
	c := sweep.CellPlan{Scenario: fanout, Options: scenarios.Values{"branches": "64"}, Version: engine.Version{Name: "baseline"},
		World: mem}
	if got, want := cellLabelValues(c), []string{"fanout", "64", "baseline", "none", "mem", "reference"}; !slices.Equal(got, want) {
		t.Errorf("reference cell: %q, want %q", got, want)
	}
	c.Target = &sweep.TargetSpec{Name: "temporal"}
	if got, want := cellLabelValues(c), []string{"fanout", "64", "", "", "", "temporal"}; !slices.Equal(got, want) {
		t.Errorf("target cell: %q, want %q", got, want)
	}
	if len(CellLabels) != len(cellLabelValues(c)) {
		t.Errorf("%d label names, %d values", len(CellLabels), len(cellLabelValues(c)))
	}
}
