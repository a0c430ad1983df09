package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/durabench/durabench/internal/target"
)

// BenchmarkProtocolOverhead: durabench's own share of a go-workflows cell's
// TTLS — the same fan-out runs measured directly in the adapter's process
// (events from its sink, the start on its clock) and through the protocol
// as a sweep drives it (loopback HTTP, the session's start request, long
// polls, clock conversion), alternating (target.MeasureOverhead). Issue 15
// asks for under 5 % at 256 branches. b.N runs each way:
//
//	go test -run '^$' -bench ProtocolOverhead -benchtime 20x
func BenchmarkProtocolOverhead(b *testing.B) {
	for _, branches := range []int{20, 64, 256} {
		b.Run(fmt.Sprintf("branches=%d", branches), func(b *testing.B) {
			o, err := target.MeasureOverhead(context.Background(), New(DefaultConfig()), "fanout",
				map[string]string{"branches": fmt.Sprint(branches)}, b.N)
			if err != nil {
				b.Fatal(err)
			}
			o.Report(b)
		})
	}
}
