package sweep

import (
	"context"
	"slices"
	"testing"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// TestMeasureIsTheSweepsCell: a cell measured in memory gives the figures
// the sweep writes for it, also when it was planned with another profile
// and given this one by WithProfile; a wrapped world sees the cell's calls.
func TestMeasureIsTheSweepsCell(t *testing.T) {
	p := findingsPlan(t, []string{"resilient"}, []string{"none"}, []int{20}, 5)
	p.Profiles = []string{"cloud"}
	f, _ := runPlan(t, p)
	want := f.Cells[0].Metrics[metrics.TTLS].Values

	other := findingsPlan(t, []string{"resilient"}, []string{"none"}, []int{20}, 5)
	other.Profiles = []string{"lan"}
	cells, err := other.Cells()
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := profile.Load("cloud")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	rc, err := other.Measure(context.Background(), cells[0].WithProfile("cloud", cloud), func(w world.World) world.World {
		return countCalls{World: w, n: &calls}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.Metrics[metrics.TTLS].Values; !slices.Equal(got, want) {
		t.Errorf("Measure TTLS %v, the sweep's %v", got, want)
	}
	if rc.Profile != "cloud" || calls == 0 {
		t.Errorf("profile %q, %d calls seen by the wrapper", rc.Profile, calls)
	}
}

type countCalls struct {
	world.World
	n *int
}

func (c countCalls) Load(ctx context.Context, run string) ([]world.Event, error) {
	*c.n++
	return c.World.Load(ctx, run)
}
