package results

import (
	"slices"
	"time"

	"github.com/durabench/durabench/metrics"
)

// BuildOptions are the facts about a cell that its timelines do not hold.
type BuildOptions struct {
	// Metrics configures the stall rule and the stream pacing interval.
	Metrics metrics.Config
	// Elapsed is the cell's measured phase duration.
	Elapsed time.Duration
	// DriverLag is actual − scheduled start of each started run (open
	// pacing); empty leaves Cell.DriverLag unset.
	DriverLag []time.Duration
	// Unstarted lists measured runs the driver never started before the cell
	// timeout. Each counts as a run and a stall (so nothing planned is
	// dropped) but has no latency.
	Unstarted []string
}

// BuildCell summarises one cell. id carries the cell's identity (Target,
// TargetSpec, TargetWorld, Engine, EngineVersion, Scenario,
// Branches, Steps, Options, Version, Switches, World, Profile); every other
// field of the result is computed from timelines, in run order: counts,
// every metric with at least one sample, the STSO slope, stalls with their
// run ids and failed runs with their errors.
func BuildCell(id Cell, timelines []metrics.RunTimeline, opt BuildOptions) Cell {
	col := metrics.Collect(timelines, opt.Metrics)
	c := Cell{
		Target: id.Target, TargetSpec: id.TargetSpec, TargetWorld: id.TargetWorld,
		Engine: id.Engine, EngineVersion: id.EngineVersion,
		Scenario: id.Scenario, Branches: id.Branches, Steps: id.Steps, Options: id.Options,
		Version: id.Version, Switches: id.Switches, World: id.World, Profile: id.Profile,
		Runs:      col.Runs + len(opt.Unstarted),
		Errors:    len(col.Failed),
		ElapsedMS: ms(opt.Elapsed),
		Metrics:   make(map[string]Metric, len(col.Samples)),
	}
	if c.Switches == nil {
		c.Switches = []string{}
	}
	for name, s := range col.Samples {
		m := NewMetric(s.Values, s.Negative)
		if stat := metrics.TestedOn(name); stat != metrics.RunValue {
			m.PerRun, m.PerRunStat = s.PerRun(stat), string(stat)
		}
		c.Metrics[name] = m
	}
	if col.CriticalPath != nil {
		c.CriticalPath = pathCategories(col.CriticalPath)
	}
	if col.CompletionPath != nil {
		c.CompletionPath = pathCategories(col.CompletionPath)
	}
	c.CRTTProgress, c.CRTTBySize = crttBins(col.CRTTProgress), crttBins(col.CRTTBySize)
	if col.HasSlope {
		c.STSOSlopeUS = &col.STSOSlope
	}
	for _, s := range col.Stalls {
		c.StalledRuns = append(c.StalledRuns, StalledRun{Run: s.Run, TTLSMS: ms(s.TTLS), Finished: s.Finished})
	}
	for _, run := range opt.Unstarted {
		c.StalledRuns = append(c.StalledRuns, StalledRun{Run: run, NotStarted: true})
	}
	c.Stalls = len(c.StalledRuns)
	c.StallThresholdMS = ms(col.Threshold)
	for _, f := range col.Failed {
		c.FailedRuns = append(c.FailedRuns, FailedRun{Run: f.Run, Error: f.Error})
	}
	if len(opt.DriverLag) > 0 {
		var s metrics.Samples
		for _, d := range opt.DriverLag {
			s.Add(d)
		}
		m := NewMetric(s.Values, s.Negative)
		c.DriverLag = &m
	}
	return c
}

func crttBins(bins []metrics.CRTTBin) []CRTTBin {
	var out []CRTTBin
	for _, b := range bins {
		out = append(out, CRTTBin{Key: b.Key, Count: b.Count,
			MeanUS: float64(b.Sum) / float64(b.Count) / float64(time.Microsecond)})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// NewMetric summarises values (µs, in run order, already clamped at 0) of
// which negatives were below zero before clamping: exact nearest-rank
// quantiles, the mean, and the encoded HDR histogram. Values is kept as
// given (a copy).
func NewMetric(values []int64, negatives int) Metric {
	m := Metric{Unit: string(metrics.Microseconds), Count: len(values), Negative: negatives,
		Values: slices.Clone(values)}
	if m.Values == nil {
		m.Values = []int64{}
	}
	h := metrics.NewHistogram()
	var sum float64
	for _, v := range values {
		h.Record(v)
		sum += float64(v)
	}
	m.HDR = h.Encode()
	m.Overflow = int(h.Overflow())
	if len(values) == 0 {
		return m
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	m.Min, m.Max = sorted[0], sorted[len(sorted)-1]
	m.P50 = metrics.Quantile(sorted, 50)
	m.P75 = metrics.Quantile(sorted, 75)
	m.P90 = metrics.Quantile(sorted, 90)
	m.P99 = metrics.Quantile(sorted, 99)
	m.Mean = sum / float64(len(values))
	return m
}
