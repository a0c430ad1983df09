package driver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

func version(t *testing.T, name string) engine.Features {
	t.Helper()
	v, err := engine.LookupVersion(name)
	if err != nil {
		t.Fatal(err)
	}
	return v.Features
}

func TestRunFanout(t *testing.T) {
	for _, p := range []Pacer{Burst{Size: 0}, Burst{Size: 2}, Closed{Concurrency: 2}, OpenRate{Rate: 200}} {
		t.Run(p.String(), func(t *testing.T) {
			w := mem.New(world.Options{})
			defer w.Close()
			res, err := Run(context.Background(), Config{World: w, Features: version(t, "resilient"),
				Program: engine.FanOut(20), RunPrefix: "abc", Reps: 5, Warmup: 2, Pacer: p,
				CellTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Timelines) != 5 || res.Interrupted || res.TimedOut || len(res.Unstarted) > 0 {
				t.Fatalf("result %+v", res)
			}
			for i, tl := range res.Timelines {
				if want := fmt.Sprintf("abc-r%04d", i+1); tl.ID != want {
					t.Errorf("run id %s, want %s", tl.ID, want)
				}
				if !tl.Finished || tl.Failed || len(tl.Steps) != 20 {
					t.Errorf("run %s: finished %v failed %v steps %d", tl.ID, tl.Finished, tl.Failed, len(tl.Steps))
				}
			}
		})
	}
}

// TestRunNoSpans: with NoSpans the engine records no spans (the runs have
// none but their driver lag, so no critical path); without it every run
// has its engine's.
func TestRunNoSpans(t *testing.T) {
	for _, off := range []bool{false, true} {
		w := mem.New(world.Options{})
		res, err := Run(context.Background(), Config{World: w, Features: version(t, "resilient"),
			Program: engine.FanOut(8), RunPrefix: "s", Reps: 3, Warmup: 1, Pacer: Burst{Size: 1},
			CellTimeout: 20 * time.Second, NoSpans: off})
		_ = w.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Timelines {
			if !tl.Finished || tl.HasEngineSpans() == off {
				t.Errorf("NoSpans %v: run %s finished %v, engine spans %v", off, tl.ID, tl.Finished, tl.HasEngineSpans())
			}
		}
		if _, spans := (&HookResumer{noSpans: off}).engineObserver().(engine.SpanObserver); spans == off {
			t.Errorf("NoSpans %v: the engine's observer takes spans: %v", off, spans)
		}
	}
}
