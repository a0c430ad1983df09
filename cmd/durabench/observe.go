package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/durabench/durabench/live"
	"github.com/durabench/durabench/sweep"
)

// observers are a sweep's outputs besides its results: live Prometheus
// metrics (--metrics-addr). They are started after the flags are validated
// and before the first cell, and see every progress event.
type observers struct {
	metricsAddr *string

	metrics *live.Metrics
	server  *live.Server
}

func bindObservers(fs *flag.FlagSet) *observers {
	return &observers{
		metricsAddr: fs.String("metrics-addr", "", "serve live Prometheus metrics at HOST:PORT/metrics while the sweep runs (e.g. :9464; docs/observability.md)"),
	}
}

// start binds the metrics address: a port in use is a usage error before
// anything runs.
func (o *observers) start(stderr io.Writer) error {
	if *o.metricsAddr != "" {
		o.metrics = live.New()
		srv, err := o.metrics.Serve(*o.metricsAddr)
		if err != nil {
			return usageErr("--metrics-addr %s: %v", *o.metricsAddr, err)
		}
		o.server = srv
		fmt.Fprintf(stderr, "durabench: metrics at http://%s/metrics\n", srv.Addr())
	}
	return nil
}

// wrap returns prog with the observers fed from it.
func (o *observers) wrap(prog sweep.Progress) sweep.Progress {
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
