package target

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
)

// Overhead is durabench's own share of a target's TTLS: the same runs of one
// backend measured directly (in the backend's process, no protocol: events
// straight from its sink, the start taken on its own clock right before
// Start) and through the protocol exactly as a sweep drives it (HTTP on
// loopback, the Session's stream, clock conversion; each run scheduled
// and started as the pacer starts a run with none in flight: to a target
// that holds starts (1.3), sent StartAhead before its schedule, else sent
// at it). The difference is what the protocol adds: the stream's CPU on
// the engine's cores and, for a start not held, its way to the engine and
// the clock conversion's error (a held start and its run's events are
// converted with the same offset, which then cancels).
type Overhead struct {
	Direct, Protocol []time.Duration // TTLS per run
	// Spans is the TTLS per run through the protocol with the runs' span
	// events asked for (protocol 1.2), when measured (OverheadOptions).
	Spans []time.Duration
	// DirectCPU, ProtocolCPU and SpansCPU are this process's CPU time
	// (the backend's and the driver's, in one process here) from each
	// run's start to its end, per side.
	DirectCPU, ProtocolCPU, SpansCPU []time.Duration
	// ClockError is the protocol session's clock error bound (RTT/2).
	ClockError time.Duration
}

// OverheadOptions tune MeasureOverheadWith.
type OverheadOptions struct {
	// Spans measures a third side, alternating with the other two: runs
	// through the protocol whose span events the session asks for, as a
	// sweep's cell that reports TTLS does.
	Spans bool
}

// p50 is the median of ds.
func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// pairedRatio is the median of a[i]/b[i].
func pairedRatio(a, b []time.Duration) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		rs = append(rs, float64(a[i])/float64(max(b[i], 1)))
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// DirectP50, ProtocolP50 and SpansP50 are the medians of each side's
// TTLS.
func (o Overhead) DirectP50() time.Duration   { return p50(o.Direct) }
func (o Overhead) ProtocolP50() time.Duration { return p50(o.Protocol) }
func (o Overhead) SpansP50() time.Duration    { return p50(o.Spans) }

// Share is the protocol's share of a target cell's TTLS p50:
// (protocol − direct) / protocol (negative when the difference is noise).
func (o Overhead) Share() float64 {
	p := o.ProtocolP50()
	if p <= 0 {
		return 0
	}
	return float64(p-o.DirectP50()) / float64(p)
}

// Report reports the measurement as benchmark metrics (b is a
// *testing.B): both medians, their ratio, the protocol's share and the
// clock's error bound, in the units internal/bench/summary reads.
func (o Overhead) Report(b interface{ ReportMetric(float64, string) }) {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(o.DirectP50()), "direct-ttls-p50-us")
	b.ReportMetric(us(o.ProtocolP50()), "protocol-ttls-p50-us")
	b.ReportMetric(float64(o.ProtocolP50())/float64(max(o.DirectP50(), 1)), "protocol/direct")
	// The same as the median of the runs' paired ratios (each run through
	// the protocol against the direct run next to it): less moved by the
	// machine's load drifting over the measurement.
	b.ReportMetric(pairedRatio(o.Protocol, o.Direct), "protocol/direct-paired")
	b.ReportMetric(100*o.Share(), "share-%")
	b.ReportMetric(us(o.ClockError), "clock-error-us")
	if len(o.Spans) > 0 {
		// What span events add: TTLS and CPU per run against the same
		// runs through the protocol without them.
		b.ReportMetric(us(o.SpansP50()), "spans-ttls-p50-us")
		b.ReportMetric(float64(o.SpansP50())/float64(max(o.ProtocolP50(), 1)), "spans/protocol")
		b.ReportMetric(us(p50(o.ProtocolCPU)), "protocol-cpu-p50-us")
		b.ReportMetric(us(p50(o.SpansCPU)), "spans-cpu-p50-us")
		b.ReportMetric(float64(p50(o.SpansCPU))/float64(max(p50(o.ProtocolCPU), 1)), "spans-cpu/protocol-cpu")
		// The same, as the median of the runs' paired ratios (each
		// with-spans run against the run without them next to it): less
		// moved by the machine's load drifting over the measurement.
		b.ReportMetric(pairedRatio(o.Spans, o.Protocol), "spans/protocol-paired")
		b.ReportMetric(pairedRatio(o.SpansCPU, o.ProtocolCPU), "spans-cpu/protocol-cpu-paired")
	}
	b.ReportMetric(0, "ns/op")
}

// MeasureOverhead opens b, runs scenario with opts runs times each way,
// alternating (so that load on the machine falls on both alike), and closes
// b. Scenarios with hooks are not measured (their resume is the driver's).
func MeasureOverhead(ctx context.Context, b protocol.Backend, scenario string, opts map[string]string, runs int) (Overhead, error) {
	return MeasureOverheadWith(ctx, b, scenario, opts, runs, OverheadOptions{})
}

// MeasureOverheadWith is MeasureOverhead with options: with Spans, a third
// side, the protocol with span events, alternates with the other two.
func MeasureOverheadWith(ctx context.Context, b protocol.Backend, scenario string, opts map[string]string, runs int,
	oo OverheadOptions) (Overhead, error) {
	var o Overhead
	sc, err := scenarios.Get(scenario)
	if err != nil {
		return o, err
	}
	prog, _, err := sc.Build(scenarios.Values(opts))
	if err != nil {
		return o, err
	}
	srv, err := protocol.NewServer(ctx, b)
	if err != nil {
		_ = b.Close(context.WithoutCancel(ctx))
		return o, err
	}
	defer func() { _ = srv.Close(context.WithoutCancel(ctx)) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return o, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	c, err := NewClient("http://" + ln.Addr().String())
	if err != nil {
		return o, err
	}
	rt := world.NewReal()
	sess, err := NewSession(ctx, c, scenario, opts, rt)
	if err != nil {
		return o, err
	}
	o.ClockError = sess.Clock().RTT / 2
	rec := metrics.NewRecorder()
	detach, err := sess.Attach(ctx, rec, rec.Fail)
	if err != nil {
		return o, err
	}
	defer detach()
	// After a run of the given TTLS, a pause of half of it, between 1 ms
	// and 1 s.
	settle := func(ttls time.Duration) error { return rt.Sleep(ctx, min(max(ttls/2, time.Millisecond), time.Second)) }
	cpu := func() time.Duration {
		d, _ := SelfCPU()
		return d
	}
	direct := func(i int) error {
		c0 := cpu()
		d, err := srv.RunDirect(ctx, protocol.StartRequest{Run: fmt.Sprintf("overhead-%d-direct", i), Scenario: scenario, Options: opts})
		if err != nil {
			return err
		}
		o.Direct, o.DirectCPU = append(o.Direct, d), append(o.DirectCPU, cpu()-c0)
		return settle(d)
	}
	through := func(i int, spans bool) error {
		id := fmt.Sprintf("overhead-%d-protocol", i)
		if spans {
			id = fmt.Sprintf("overhead-%d-spans", i)
		}
		sess.Spans = spans
		c0 := cpu()
		done := make(chan struct{})
		// As a sweep's pacer starts a run: its schedule now, or, for a
		// target that holds starts (1.3), StartAhead from now with its
		// start sent at once.
		sched := rt.Now()
		if sess.StartsAt() {
			sched += sess.StartAhead()
		}
		if err := rec.Begin(id, sched, prog.StepCount(), func() { close(done) }); err != nil {
			return err
		}
		defer rec.Forget(id)
		if err := sess.StartRunAt(ctx, id, prog, sched); err != nil {
			return err
		}
		_, _ = sess.StartSent(id) // not a paced run: no lag to take
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		c := cpu() - c0
		tl, _ := rec.Snapshot(id, rt.Now())
		if tl.Failed {
			return fmt.Errorf("run %s: %s", id, tl.Error)
		}
		if spans && !tl.HasEngineSpans() {
			return fmt.Errorf("run %s: span events asked for, none came", id)
		}
		ttls, _ := metrics.TimeToLastStep(&tl)
		if spans {
			o.Spans, o.SpansCPU = append(o.Spans, ttls), append(o.SpansCPU, c)
		} else {
			o.Protocol, o.ProtocolCPU = append(o.Protocol, ttls), append(o.ProtocolCPU, c)
		}
		return settle(ttls)
	}
	sides := []func(int) error{direct, func(i int) error { return through(i, false) }}
	if oo.Spans {
		sides = append(sides, func(i int) error { return through(i, true) })
	}
	for i := range runs {
		// Which side goes first rotates, and each run is followed by a
		// pause of half its TTLS: the engine's work after a run ends
		// (its last writes, caches) falls on no side more than another.
		for j := range sides {
			if err := sides[(i+j)%len(sides)](i); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}
