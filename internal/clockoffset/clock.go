// Package clockoffset estimates the offset between the driver's clock and another
// process's — a durabench worker, a target engine — from request/reply
// round trips, NTP-style: the sample with the smallest round trip wins, and
// the estimate is wrong by at most half that round trip.
package clockoffset

import "time"

// Sample is one request/reply round trip: the driver's clock when it sent
// the request and when the reply came back, and the other side's clock
// when it answered.
type Sample struct {
	Send, Recv, Remote time.Duration
}

// RTT is the sample's round-trip time.
func (s Sample) RTT() time.Duration { return s.Recv - s.Send }

// Offset is the other clock minus the driver's, assuming the other side
// read its clock half-way through the round trip.
func (s Sample) Offset() time.Duration { return s.Remote - (s.Send+s.Recv)/2 }

// Offset is another process's clock against the driver's. A timestamp t
// of the other clock is t − Offset on the driver's; the conversion is
// wrong by at most RTT/2 (the other side answered somewhere in the round
// trip).
type Offset struct {
	Offset, RTT time.Duration
	// Samples is how many round trips the estimate chose from.
	Samples int
}

// Estimate picks the sample with the smallest round trip (the one least
// disturbed by queueing) and returns its offset. ok is false when there is
// no sample.
func Estimate(samples []Sample) (o Offset, ok bool) {
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
		return Offset{}, false
	}
	return Offset{Offset: samples[best].Offset(), RTT: samples[best].RTT(), Samples: len(samples)}, true
}

// ToDriver converts a timestamp of the other clock to the driver's.
func (o Offset) ToDriver(t time.Duration) time.Duration { return t - o.Offset }
