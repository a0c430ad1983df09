package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/durabench/durabench/engine
cpu: Test CPU
BenchmarkFanOutMem/baseline/branches=20-2   	20	3618934 ns/op	145.0 floor-ops/run	420.7 floor-ttls-p50-us	145.0 ops/run	1.536 ratio	646.1 ttls-p50-us
BenchmarkFanOutMem/baseline/branches=256-2  	20	103820825 ns/op	1797 floor-ops/run	36856 floor-ttls-p50-us	1797 ops/run	1.346 ratio	49593 ttls-p50-us
BenchmarkFanOutMem/baseline/branches=256-2  	20	103820825 ns/op	1797 floor-ops/run	30000 floor-ttls-p50-us	1797 ops/run	3.5 ratio	50000 ttls-p50-us
BenchmarkFanOutMem/baseline/branches=256-2  	20	103820825 ns/op	1797 floor-ops/run	32000 floor-ttls-p50-us	1797 ops/run	1.2 ratio	40000 ttls-p50-us
PASS
pkg: github.com/durabench/durabench/metrics
BenchmarkFanOutMem/pending-count/branches=256-2  	20	103820825 ns/op	6315 floor-ops/run	14500 floor-ttls-p50-us	1313 ops/run	0.24 ratio	3480 ttls-p50-us
BenchmarkRecorderStepBody-2 	2686581	95.6 ns/op	0.9857 x-time.Now	0 B/op	0 allocs/op
BenchmarkUnrelated-2 	100	5 ns/op
BenchmarkFanOut256/baseline-2 	5	20000000 ns/op	50.0 runs/s
BenchmarkPacer/null/rate=500-2 	1	3.9 coarse-cpu-%	774.4 coarse-lag-p50-us	1365 coarse-lag-p99-us	4.2 cpu-%	11.63 lag-p50-us	240 lag-p99-us	0.1758 precise/coarse
BenchmarkCapacityProtocol-2 	2	0 errors	7162 lag-p99-us	9991 runs/s	9994 floor-runs/s	0.9997 engine/floor	10059 floor-lag-p99-us	0.5456 steal-cores
ok  	github.com/durabench/durabench/metrics	1.2s
`

func TestRender(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	benches, header, err := read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	missed := render(&out, benches, header)
	got := out.String()
	for _, want := range []string{
		"linux/amd64, Test CPU",
		"| FanOutMem/baseline/branches=20 | 646µs | 421µs | 1.54× |  |  |",
		// Median over three repetitions, with the ratio's range.
		"| FanOutMem/baseline/branches=256 | 49.6ms | 32ms | 1.35× (1.20–3.50) | ratio ≤ 3 | ✓ |",
		// The floor derived from the ratio unit.
		"| RecorderStepBody | 95.6 ns | 97 ns | 0.99× | < 100 ns, 0 allocs | ✓ |",
		"| FanOut256/baseline | 50 runs/s |  |  | ≥ 100 runs/s | ✗ |",
		"| FanOutMem/pending-count/branches=256 | 3.48ms | 14.5ms | 0.24× | ratio ≤ 3 | ≠ |",
		// A pacer row: its p50s and CPU shares after its name.
		"| Pacer/null/rate=500 (p50 11.6µs, coarse p50 774µs, CPU 4%, coarse CPU 4%) | 240µs | 1.37ms | 0.18× | lag p50 ≤ 25 µs, p99 ≤ 300 µs | ✓ |",
		// The protocol's capacity, with the null target's lag and the
		// host's steal beside it: whether the machine set the tail.
		"| CapacityProtocol (p99 7.16ms, errors 0, null target lag p99 10.1ms, host steal 0.55 cores) | 9991 runs/s | 9994 runs/s | 1.00× | ≥ 9,500 runs/s, lag p99 < 1 ms, 0 errors (target on 1 processor) | ✗ |",
		"3 of 5 targets met; 1 other benchmarks are in the raw output.",
		"≠ FanOutMem/pending-count/branches=256: the engine issued 1313 world operations per run, the floor 6315",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if missed != 2 {
		t.Errorf("missed = %d, want 2", missed)
	}
}
