package main

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/protocol"
)

// BenchmarkScenarios runs fan-outs of 20, 64 and 256 branches, one step and
// a 20-step sequence (body 0) on the
// adapter with its in-process server, as `durabench-target-temporal` runs
// them, and reports per run: TTFS (first step start − start request sent),
// TTLS (last step completion − sent) and TTC (run_completed − sent), all on
// the adapter's clock, p50 over b.N runs.
//
//	go test -run '^$' -bench Scenarios -benchtime 20x
//
// The -bench.* flags (after -args) try other worker and server settings.
func BenchmarkScenarios(b *testing.B) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.ActivityPollers = *benchActivityPollers
	cfg.WorkflowPollers = *benchWorkflowPollers
	cfg.Partitions = *benchPartitions
	cfg.DisableEager = *benchNoEager
	cfg.StockServer = *benchStock
	be := NewBackend(cfg)
	srv, err := protocol.NewServer(ctx, be)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	c, _ := target.NewClient(hs.URL)
	cells := []struct{ name, scenario, opt, val string }{
		{"fanout/branches=20", "fanout", "branches", "20"},
		{"fanout/branches=64", "fanout", "branches", "64"},
		{"fanout/branches=256", "fanout", "branches", "256"},
		{"step", "step", "body", "0s"},
		{"sequential/steps=20", "sequential", "steps", "20"},
	}
	for _, cell := range cells {
		b.Run(cell.name, func(b *testing.B) {
			var ttfs, ttls, ttc []time.Duration
			for i := range b.N {
				run := fmt.Sprintf("bench-%s-%d-%d", cell.scenario, i, time.Now().UnixNano())
				sent := int64(be.Now()) // the same clock as the events: one process
				_, err := c.Start(ctx, protocol.StartRequest{Run: run, Scenario: cell.scenario, Options: map[string]string{cell.opt: cell.val}})
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
						case protocol.EventStepStarted:
							if first == 0 || ev.At < first {
								first = ev.At
							}
						case protocol.EventStepCompleted:
							last = max(last, ev.At)
						case protocol.EventRunCompleted:
							end = ev.At
						}
					}
					if tl.Terminal() {
						if tl.Status != protocol.StatusCompleted {
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
			b.ReportMetric(float64(slices.Max(ttc))/1e6, "ttc-max-ms")
		})
	}
}

var (
	benchActivityPollers = flag.Int("bench.activity-pollers", DefaultConfig().ActivityPollers, "BenchmarkScenarios: activity pollers")
	benchWorkflowPollers = flag.Int("bench.workflow-pollers", DefaultConfig().WorkflowPollers, "BenchmarkScenarios: workflow pollers")
	benchPartitions      = flag.Int("bench.partitions", DefaultConfig().Partitions, "BenchmarkScenarios: task queue partitions")
	benchNoEager         = flag.Bool("bench.no-eager", false, "BenchmarkScenarios: no eager activity dispatch")
	benchStock           = flag.Bool("bench.stock-server", false, "BenchmarkScenarios: the server's default dynamic config")
)

func p50ms(d []time.Duration) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)/2]) / 1e6
}
