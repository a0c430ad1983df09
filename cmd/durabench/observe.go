package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/reporters/live"
	"github.com/durabench/durabench/reporters/traces"
)

// observers are a sweep's outputs besides its results: live Prometheus
// metrics (--metrics-addr), the timelines file kept beside results.json
// (traces.StoreName, for report --format otlp) and OTLP traces of every run
// (--trace-dir). They are started after the flags are validated and before
// the first cell, and see every progress event.
type observers struct {
	metricsAddr *string
	traceDir    *string

	metrics  *live.Metrics
	server   *live.Server
	recorder *traces.Writer
}

func bindObservers(fs *flag.FlagSet) *observers {
	return &observers{
		metricsAddr: fs.String("metrics-addr", "", "serve live Prometheus metrics at HOST:PORT/metrics while the sweep runs (e.g. :9464; docs/observability.md)"),
		traceDir:    fs.String("trace-dir", "", "write every measured run's timeline as OTLP/JSON traces into DIR, one file per cell as it ends (docs/observability.md)"),
	}
}

// start binds the metrics address (a port in use is a usage error before
// anything runs) and sets up the timelines of the sweep writing into dir.
func (o *observers) start(dir string, stderr io.Writer) error {
	if *o.metricsAddr != "" {
		o.metrics = live.New()
		srv, err := o.metrics.Serve(*o.metricsAddr)
		if err != nil {
			return usageErr("--metrics-addr %s: %v", *o.metricsAddr, err)
		}
		o.server = srv
		fmt.Fprintf(stderr, "durabench: metrics at http://%s/metrics\n", srv.Addr())
	}
	o.recorder = &traces.Writer{Store: filepath.Join(dir, traces.StoreName), Dir: *o.traceDir,
		Warn: func(err error) { fmt.Fprintf(stderr, "durabench: traces: %v\n", oneLine(err)) }}
	return nil
}

// wrap returns prog with the observers fed from it.
func (o *observers) wrap(prog sweep.Progress) sweep.Progress {
	if o.recorder != nil {
		prog = o.recorder.Progress(prog)
	}
	if o.metrics != nil {
		prog = o.metrics.Progress(prog)
	}
	return prog
}

// close stops serving the metrics.
func (o *observers) close() {
	if o.server != nil {
		_ = o.server.Close()
	}
}
