package reporters

import (
	"time"

	"github.com/durabench/durabench/results"
)

// Options shape the Text and Markdown reports. The zero value renders the
// results file alone, as markdown.
type Options struct {
	// Baseline, when set, is the sweep to compare with: each cell shows its
	// change against the baseline's matching cell (same scenario, branches,
	// steps, options, version, switches, world and profile).
	Baseline *results.File
	// Null, with Baseline, is a second sweep of the baseline (same commit,
	// machine and settings): each row shows its null Δ (the change noise
	// alone makes), and a change no larger than it loses its marks.
	Null *results.File
	// History are earlier sweeps, shown newest first in a collapsed
	// "Previous results" section.
	History []*results.File
	// GitHub renders a pull-request comment: a hidden marker for the sticky
	// comment, an embedded compact copy of the results and a body trimmed to
	// stay under GitHub's comment size limit.
	GitHub bool
	// Targets are p75/p90/p99 targets in milliseconds per metric name
	// ("ttfs", "sl", ...). They override the file's plan targets, which
	// override the built-in targets of the cloud profile.
	Targets map[string][3]float64
	// Now stamps the report; time.Now when nil.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

// CloudTargets are the default p75/p90/p99 targets in milliseconds for cells
// on the cloud profile, from the reference SDK's benchmark conventions.
var CloudTargets = map[string][3]float64{
	"ttfs": {200, 300, 600},
	"sl":   {50, 60, 125},
	"so":   {250, 500, 1000},
}

// targetsFor returns the targets that apply to a cell of file f: Options
// first, then the plan's, then the cloud defaults when the cell runs on the
// cloud profile.
func (o Options) targetsFor(f *results.File, c *results.Cell) map[string][3]float64 {
	out := map[string][3]float64{}
	if c.Profile == "cloud" {
		for k, v := range CloudTargets {
			out[k] = v
		}
	}
	for k, v := range f.Plan.Targets {
		out[k] = v
	}
	for k, v := range o.Targets {
		out[k] = v
	}
	return out
}
