package world

import "fmt"

// Incidents counts what went wrong below the world contract while a world
// served a cell: replies a client dropped, calls that timed out, reads
// refused for a gap, lost connections, asynchronous errors, and calls that
// failed with ErrTransient (which the engine retries). Injected faults of a
// latency profile are not incidents: they are what the profile asked for.
// A clean run of a real backend has all zeros; anything else is shown next
// to stalls and errors in every report, so a loss is never silent.
type Incidents struct {
	Dropped      int64  `json:"dropped,omitempty"`
	SlowConsumer int64  `json:"slow_consumer,omitempty"`
	Timeouts     int64  `json:"timeouts,omitempty"`
	Gaps         int64  `json:"gaps,omitempty"`
	Disconnects  int64  `json:"disconnects,omitempty"`
	Reconnects   int64  `json:"reconnects,omitempty"`
	AsyncErrors  int64  `json:"async_errors,omitempty"`
	Transient    int64  `json:"transient,omitempty"`
	Last         string `json:"last,omitempty"` // the last incident's error, for a person to read
}

// IncidentCounter is implemented by worlds that count incidents (the NATS
// world); the others have none to report.
type IncidentCounter interface {
	Incidents() Incidents
}

// Total is the number of incidents of every kind.
func (i Incidents) Total() int64 {
	return i.Dropped + i.SlowConsumer + i.Timeouts + i.Gaps + i.Disconnects + i.Reconnects + i.AsyncErrors + i.Transient
}

// Add returns the sum of i and o (Last from o when it has one).
func (i Incidents) Add(o Incidents) Incidents {
	i.Dropped += o.Dropped
	i.SlowConsumer += o.SlowConsumer
	i.Timeouts += o.Timeouts
	i.Gaps += o.Gaps
	i.Disconnects += o.Disconnects
	i.Reconnects += o.Reconnects
	i.AsyncErrors += o.AsyncErrors
	i.Transient += o.Transient
	if o.Last != "" {
		i.Last = o.Last
	}
	return i
}

// String is a one-line summary of the non-zero counts ("" when none).
func (i Incidents) String() string {
	s := ""
	add := func(n int64, what string) {
		if n == 0 {
			return
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", n, what)
	}
	add(i.Dropped, "dropped")
	add(i.SlowConsumer, "slow consumer")
	add(i.Timeouts, "timeouts")
	add(i.Gaps, "gaps")
	add(i.Disconnects, "disconnects")
	add(i.Reconnects, "reconnects")
	add(i.AsyncErrors, "async errors")
	add(i.Transient, "transient")
	return s
}

// IncidentsOf returns w's incidents, looking through decorators that
// expose the world they wrap (an Unwrap() World method); zero when no
// layer counts any.
func IncidentsOf(w World) Incidents {
	for w != nil {
		if c, ok := w.(IncidentCounter); ok {
			return c.Incidents()
		}
		u, ok := w.(interface{ Unwrap() World })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return Incidents{}
}
