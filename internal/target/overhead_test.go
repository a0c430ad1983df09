package target_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/world/registry"
)

// BenchmarkProtocolOverhead: the built-in engine on the embedded NATS world,
// one fan-out cell measured directly and through the target protocol
// (loopback HTTP, the session a sweep uses), runs alternating: TTLS p50 of
// each, their ratio, and the protocol's share of the protocol-side TTLS;
// and a third side alternating with them, through the protocol with the
// runs' span events (1.2): its TTLS p50 and CPU per run against the
// protocol's without them. b.N runs each way (make bench: -benchtime=20x).
func BenchmarkProtocolOverhead(b *testing.B) {
	for _, branches := range []int{20, 64, 256} {
		b.Run(fmt.Sprintf("branches=%d", branches), func(b *testing.B) {
			ctx := context.Background()
			kind, err := registry.Lookup("nats")
			if err != nil {
				b.Fatal(err)
			}
			w, err := kind.New(ctx, registry.Config{Settings: kind.Defaults(), SoleWriter: true})
			if err != nil {
				b.Fatal(err)
			}
			v, err := engine.LookupVersion("pending-count")
			if err != nil {
				b.Fatal(err)
			}
			o, err := target.MeasureOverheadWith(ctx, reference.New(w, v), "fanout",
				map[string]string{"branches": fmt.Sprint(branches)}, b.N, target.OverheadOptions{Spans: true})
			if err != nil {
				b.Fatal(err)
			}
			o.Report(b)
		})
	}
}

// TestMeasureOverhead: the measurement itself — both sides measure every
// run, the direct side's TTLS is a real fan-out's (not zero), and the
// protocol's share is what the two medians say.
func TestMeasureOverhead(t *testing.T) {
	ctx := context.Background()
	kind, err := registry.Lookup("mem")
	if err != nil {
		t.Fatal(err)
	}
	w, err := kind.New(ctx, registry.Config{Settings: kind.Defaults(), SoleWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := engine.LookupVersion("pending-count")
	o, err := target.MeasureOverhead(ctx, reference.New(w, v), "fanout", map[string]string{"branches": "16", "body": "2ms"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Direct) != 5 || len(o.Protocol) != 5 {
		t.Fatalf("%d direct and %d protocol runs, want 5 each", len(o.Direct), len(o.Protocol))
	}
	for i := range 5 {
		if o.Direct[i] < 2*time.Millisecond || o.Protocol[i] < 2*time.Millisecond {
			t.Errorf("run %d: TTLS direct %v, protocol %v: below the 2 ms step body", i, o.Direct[i], o.Protocol[i])
		}
	}
	// The units internal/bench/summary reads (its ProtocolOverhead rule).
	rec := metricRecorder{}
	o.Report(rec)
	for _, unit := range []string{"direct-ttls-p50-us", "protocol-ttls-p50-us", "protocol/direct"} {
		if v, ok := rec[unit]; !ok || v <= 0 {
			t.Errorf("Report: %s = %v (reported %v), want a positive value", unit, v, ok)
		}
	}
	if got, want := rec["direct-ttls-p50-us"], float64(o.DirectP50())/1e3; got != want {
		t.Errorf("direct-ttls-p50-us %v, want the direct median %v µs", got, want)
	}
	t.Logf("TTLS p50 direct %v, protocol %v, share %.1f%%, clock error %v", o.DirectP50(), o.ProtocolP50(), 100*o.Share(), o.ClockError)
}

// metricRecorder keeps what a benchmark would report.
type metricRecorder map[string]float64

func (m metricRecorder) ReportMetric(v float64, unit string) { m[unit] = v }
