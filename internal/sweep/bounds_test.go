package sweep

import (
	"context"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world/registry"
)

// TestPlanMustFitInMemory: Validate refuses a cell whose runs would not fit
// in the memory limit, naming the setting to lower and the largest value
// that fits — the run's size when one run alone is too big (or the
// warm-ups leave no room), else reps.
func TestPlanMustFitInMemory(t *testing.T) {
	file := writeFile(t, "sweep.yaml", "scenarios:\n  - name: sequential\n    options: {steps: 5000000}\nworlds: [mem]\nmax_memory: 2GiB\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--world", "mem", "--branches", "1000000000", "--reps", "1", "--max-memory", "1GiB"},
			"--branches 1000000000: too big for memory: 3 runs × 1000000000 branches on mem need about 33.5 TiB at 12 KiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 29127 branches fit"},
		{[]string{"--world", "mem", "--branches", "100000", "--reps", "1", "--max-memory", "1GiB"},
			"--branches 100000: too big for memory: 3 runs × 100000 branches on mem need about 3.4 GiB at 12 KiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 29127 branches fit"},
		{[]string{"--world", "mem,nats", "--branches", "20,1000", "--reps", "1000000", "--max-memory", "1GiB"},
			"--reps 1000000: too big for memory: 1000002 runs × 20 branches on mem need about 228.9 GiB at 12 KiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 4367 reps fit (with 2 warm-ups)"},
		{[]string{"--world", "sim", "--scenario", "sequential", "--option", "steps=100000", "--max-memory", "1GiB"},
			"--option steps=100000: too big for memory: 12 runs × 100000 steps on sim need about 13.7 GiB at 12 KiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 7281 steps fit"},
		{[]string{"--world", "mem", "--scenario", "step", "--reps", "1000000", "--warmup", "0", "--max-memory", "1GiB"},
			"--reps 1000000: too big for memory: 1000000 runs on mem need about 11.4 GiB at 12 KiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 87381 reps fit"},
		{[]string{"-f", file},
			file + ":3: scenarios.options.steps: too big for memory: 12 runs × 5000000 steps on mem need about 686.6 GiB at 12 KiB each, " +
				"over the limit of 2 GiB (--max-memory); at most 14563 steps fit"},
		// A payload is stored twice per step (input and output).
		{[]string{"--world", "mem", "--scenario", "payload", "--option", "size=1MB", "--option", "steps=1000", "--max-memory", "1GiB"},
			"--option steps=1000: too big for memory: 12 runs × 1000 steps on mem need about 23.6 GiB at 2.0 MiB each, " +
				"over the limit of 1 GiB (--max-memory); at most 42 steps fit"},
		{[]string{"--max-memory", "lots"}, `--max-memory lots: "lots" is not a memory size such as 8GiB or 512MiB`},
	}
	for _, c := range cases {
		_, err := planFrom(t, c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v:\nerror %v\nwant  %s", c.args, err, c.want)
		}
	}
	// A big plan that fits at the default limit validates: 10,000
	// branches, 12 runs a cell, on mem.
	if _, err := planFrom(t, "--world", "mem", "--branches", "20,10000"); err != nil {
		t.Errorf("10,000 branches: %v", err)
	}
	if avail := availableMemory(); avail < 64<<20 {
		t.Errorf("available memory %d B", avail)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"8GiB": 8 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "1.5 GiB": 3 << 29, "4096": 4096, "64KiB": 64 << 10} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "8XB", "-1GiB", "0"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
	if got := formatBytes(3 << 29); got != "1.5 GiB" {
		t.Errorf("formatBytes(1.5 GiB) = %q", got)
	}
}

// BenchmarkCellHeap measures what registry.Kind.StepBytes declares, per
// world: the peak heap growth of a sweep cell (one run of a fan-out) per
// branch, as the difference between a small and a large fan-out, so that
// what a cell costs whatever its size (the engine, the results file) does
// not count. It reports B/branch next to the declared figure.
//
//	go test -run '^$' -bench CellHeap -benchtime=3x ./internal/sweep/
func BenchmarkCellHeap(b *testing.B) {
	for _, w := range []struct {
		name         string
		small, large int
	}{{"mem", 1000, 8000}, {"sim", 1000, 8000}, {"nats", 500, 2500}} {
		b.Run(w.name, func(b *testing.B) {
			kind, err := registry.Lookup(w.name)
			if err != nil {
				b.Fatal(err)
			}
			peak := func(branches int) float64 {
				p := DefaultPlan()
				p.Worlds = []string{w.name}
				p.Branches = []int{branches}
				v, _ := engine.LookupVersion("resilient")
				p.Versions, p.Switches = []engine.Version{v}, []engine.SwitchSet{{}}
				p.Reps, p.Warmup = 1, 0
				if err := p.Validate(); err != nil {
					b.Fatal(err)
				}
				return float64(peakHeapGrowth(func() {
					if _, err := Run(context.Background(), Config{Plan: p, Out: filepath.Join(b.TempDir(), "out")}); err != nil {
						b.Fatal(err)
					}
				}))
			}
			var small, large float64
			for range b.N {
				small, large = max(small, peak(w.small)), max(large, peak(w.large))
			}
			per := (large - small) / float64(w.large-w.small)
			b.ReportMetric(per, "B/branch")
			b.ReportMetric(float64(kind.BytesPerStep()), "declared-B/branch")
			if per > float64(kind.BytesPerStep()) {
				b.Errorf("%s: %.0f B per branch measured, %d declared (registry.Kind.StepBytes)", w.name, per, kind.BytesPerStep())
			}
		})
	}
}

// peakHeapGrowth runs fn and returns how far the heap in use grew above
// where it stood before, at its peak (sampled every 2 ms).
func peakHeapGrowth(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}
