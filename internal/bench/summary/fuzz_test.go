package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// FuzzBenchfmt: any `go test -bench` output (make bench's out/bench.txt,
// a file a user passes) makes a table or an error; never a panic.
func FuzzBenchfmt(f *testing.F) {
	f.Add(sample)
	if b, err := os.ReadFile("../../../out/bench.txt"); err == nil && len(b) < 1<<20 {
		f.Add(string(b))
	}
	f.Add("BenchmarkX-2 1 5 ns/op\n")
	f.Add("BenchmarkSoakNATS 1 7014 steps/s 7321 floor-steps/s 0.96 engine/floor\n")
	f.Fuzz(func(t *testing.T, data string) {
		var c collector
		if err := c.scan(strings.NewReader(data), "bench.txt"); err != nil {
			return
		}
		render(io.Discard, c.order, c.header())
	})
}
