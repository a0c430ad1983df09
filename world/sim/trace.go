package sim

import (
	"bufio"
	"fmt"
	"io"
	"time"
)

// Record is one scheduled operation of a simulation.
type Record struct {
	// At is the virtual time the operation took effect.
	At time.Duration
	// Task is the id of the task that performed it (0: the scheduler itself,
	// e.g. a visibility timeout firing).
	Task int
	// Op names the operation: a world.Op ("step_completed", "log_load", ...)
	// or a scheduler event ("spawn", "sleep", "deliver", "redeliver", ...).
	Op string
	// Run is the run the operation concerns, if any.
	Run string
	// Detail is the operation's arguments and outcome.
	Detail string
}

// Trace records every scheduled operation of a sim world, in order. Two runs
// with the same seed and program write byte-identical traces, so a trace is
// both a failure report and a replay check. A Trace is not safe for use by
// several worlds at once.
type Trace struct {
	notes []string
	recs  []Record
}

// NewTrace returns an empty trace.
func NewTrace() *Trace { return &Trace{} }

// Note adds a header line (seed, log model, scenario...) written before the
// records.
func (t *Trace) Note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *Trace) add(r Record) { t.recs = append(t.recs, r) }

// Records returns the records so far.
func (t *Trace) Records() []Record { return t.recs }

// Len is the number of records.
func (t *Trace) Len() int { return len(t.recs) }

// WriteTo writes the trace as text: the notes as "# " lines, then one line
// per record: virtual time in seconds (µs precision), task, op, run, detail.
func (t *Trace) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for _, s := range t.notes {
		k, _ := fmt.Fprintf(bw, "# %s\n", s)
		n += int64(k)
	}
	for _, r := range t.recs {
		k, _ := fmt.Fprintf(bw, "%13.6fs t%-4d %-15s %-12s %s\n", r.At.Seconds(), r.Task, r.Op, r.Run, r.Detail)
		n += int64(k)
	}
	return n, bw.Flush()
}
