package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/target"
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
			us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
			b.ReportMetric(us(o.DirectP50()), "direct-ttls-p50-us")
			b.ReportMetric(us(o.ProtocolP50()), "protocol-ttls-p50-us")
			b.ReportMetric(float64(o.ProtocolP50())/float64(max(o.DirectP50(), 1)), "protocol/direct")
			b.ReportMetric(100*o.Share(), "share-%")
			b.ReportMetric(us(o.ClockError), "clock-error-us")
			b.ReportMetric(0, "ns/op")
		})
	}
}
