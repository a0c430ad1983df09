package cluster

import clockoffset "github.com/durabench/durabench/internal/clockoffset"

// ClockSample is one internal/driver/worker round trip (package clock); Worker is
// the worker's clock when it answered.
type ClockSample = clockoffset.Sample

// Clock is a worker's clock offset against the driver's (package clock).
type Clock = clockoffset.Offset

// EstimateOffset picks the min-RTT sample (clockoffset.Estimate).
func EstimateOffset(samples []ClockSample) (Clock, bool) { return clockoffset.Estimate(samples) }
