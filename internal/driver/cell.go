package driver

import (
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Summarize summarises the result as a results.Cell. id carries the cell's
// identity (scenario, options, version, switches, world, profile); stall
// decides which runs are stalls. Driver lag is recorded for open pacing
// only, where the schedule is independent of the system under test.
func (r *Result) Summarize(id results.Cell, cfg metrics.Config, open bool) results.Cell {
	opt := results.BuildOptions{Metrics: cfg, Elapsed: r.Elapsed, Unstarted: r.Unstarted}
	if open {
		opt.DriverLag = r.Lag
	}
	return results.BuildCell(id, r.Timelines, opt)
}
