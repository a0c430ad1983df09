package cluster

import "time"

// ClockSample is one request/reply round trip: the driver's clock when it
// sent the request and when the reply came back, and the worker's clock
// when it answered.
type ClockSample struct {
	Send, Recv, Worker time.Duration
}

// RTT is the sample's round-trip time.
func (s ClockSample) RTT() time.Duration { return s.Recv - s.Send }

// Offset is the worker's clock minus the driver's, assuming the worker read
// its clock half-way through the round trip.
func (s ClockSample) Offset() time.Duration { return s.Worker - (s.Send+s.Recv)/2 }

// Clock is a worker's clock offset against the driver's. A worker
// timestamp t is t − Offset on the driver's clock; the conversion is
// wrong by at most RTT/2 (the worker answered somewhere in the round trip).
type Clock struct {
	Offset, RTT time.Duration
	// Samples is how many round trips the estimate chose from.
	Samples int
}

// EstimateOffset picks the sample with the smallest round trip (the one
// least disturbed by queueing, NTP-style) and returns its offset. ok is
// false when there is no sample.
func EstimateOffset(samples []ClockSample) (c Clock, ok bool) {
	best := -1
	for i, s := range samples {
		if s.RTT() < 0 {
			continue
		}
		if best < 0 || s.RTT() < samples[best].RTT() {
			best = i
		}
	}
	if best < 0 {
		return Clock{}, false
	}
	return Clock{Offset: samples[best].Offset(), RTT: samples[best].RTT(), Samples: len(samples)}, true
}

// ToDriver converts a worker timestamp to the driver's clock.
func (c Clock) ToDriver(t time.Duration) time.Duration { return t - c.Offset }
