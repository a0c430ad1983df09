package cluster

import "github.com/durabench/durabench/clock"

// ClockSample is one driver/worker round trip (package clock); Worker is
// the worker's clock when it answered.
type ClockSample = clock.Sample

// Clock is a worker's clock offset against the driver's (package clock).
type Clock = clock.Offset

// EstimateOffset picks the min-RTT sample (clock.Estimate).
func EstimateOffset(samples []ClockSample) (Clock, bool) { return clock.Estimate(samples) }
