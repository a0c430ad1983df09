package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/durabench/durabench/target"
)

// BenchmarkFanout runs fan-outs of 20, 64 and 256 branches (body 0) on the
// adapter with its in-process server, as `durabench-target-temporal` runs
// them, and reports per run: TTFS (first step start − start request sent),
// TTLS (last step completion − sent) and TTC (run_completed − sent), all on
// the adapter's clock, p50 over b.N runs.
//
//	go test -run '^$' -bench Fanout -benchtime 20x
func BenchmarkFanout(b *testing.B) {
	ctx := context.Background()
	be := NewBackend(DefaultConfig())
	srv, err := target.NewServer(ctx, be)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	c, _ := target.NewClient(hs.URL)
	for _, n := range []int{20, 64, 256} {
		b.Run(fmt.Sprintf("branches=%d", n), func(b *testing.B) {
			var ttfs, ttls, ttc []time.Duration
			for i := range b.N {
				run := fmt.Sprintf("bench-%d-%d-%d", n, i, time.Now().UnixNano())
				sent := int64(be.Now()) // the same clock as the events: one process
				_, err := c.Start(ctx, target.StartRequest{Run: run, Scenario: "fanout", Options: map[string]string{"branches": fmt.Sprint(n)}})
				if err != nil {
					b.Fatal(err)
				}
				var first, last, end int64
				var after int64
				for {
					tl, err := c.Timeline(ctx, run, after, 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					for _, ev := range tl.Events {
						after = ev.Seq
						switch ev.Kind {
						case target.EventStepStarted:
							if first == 0 || ev.At < first {
								first = ev.At
							}
						case target.EventStepCompleted:
							last = max(last, ev.At)
						case target.EventRunCompleted:
							end = ev.At
						}
					}
					if tl.Terminal() {
						if tl.Status != target.StatusCompleted {
							b.Fatalf("%s: %s", tl.Status, tl.Error)
						}
						break
					}
				}
				ttfs = append(ttfs, time.Duration(first-sent))
				ttls = append(ttls, time.Duration(last-sent))
				ttc = append(ttc, time.Duration(end-sent))
			}
			b.ReportMetric(p50ms(ttfs), "ttfs-p50-ms")
			b.ReportMetric(p50ms(ttls), "ttls-p50-ms")
			b.ReportMetric(p50ms(ttc), "ttc-p50-ms")
		})
	}
}

func p50ms(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2]) / 1e6
}
