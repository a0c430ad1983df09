package traces

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/durabench/durabench/metrics"
)

// StoreName is the timelines file a sweep keeps beside its results.json.
const StoreName = "timelines.jsonl.gz"

// KeepPerCell bounds what the store keeps of one cell: every stalled or
// failed run, the first KeepPerCell other runs in run order and the
// KeepSlowest slowest of the rest, so a soak of thousands of runs keeps a
// few megabytes while every run a person asks about first (a stall, a
// failure, the tail) is there.
const (
	KeepPerCell = 20
	KeepSlowest = 5
)

// record is one line of the store: a cell header, followed by the lines of
// its runs.
type record struct {
	Cell *CellInfo            `json:"cell,omitempty"`
	Run  *metrics.RunTimeline `json:"run,omitempty"`
	// Spans are every span the run recorded (Recorded), beside it: the
	// timeline itself writes none (RunTimeline.Spans is not written).
	Spans []metrics.Span `json:"spans,omitempty"`
}

// AppendCell appends one cell and the runs of it to keep (see Keep) to the
// store at path, as one gzip member: a sweep killed while writing leaves
// every earlier cell readable.
func AppendCell(path string, c CellInfo, runs []metrics.RunTimeline) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("timelines: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	enc := json.NewEncoder(zw)
	err = enc.Encode(record{Cell: &c})
	for i := 0; err == nil && i < len(runs); i++ {
		run := withPath(runs[i])
		err = enc.Encode(record{Run: &run, Spans: Recorded(&run)})
	}
	err = errors.Join(err, zw.Close(), bw.Flush(), f.Close())
	if err != nil {
		return fmt.Errorf("timelines %s: %w", path, err)
	}
	return nil
}

// Keep picks the runs of one cell the store keeps: stalled (the ids the
// cell's stall rule named) and failed runs, the first KeepPerCell others
// and the KeepSlowest slowest of the rest, in run order.
func Keep(runs []metrics.RunTimeline, stalled map[string]bool) []metrics.RunTimeline {
	if len(runs) <= KeepPerCell+KeepSlowest {
		return runs
	}
	keep := make([]bool, len(runs))
	var rest []int
	others := 0
	for i := range runs {
		switch {
		case runs[i].Failed || !runs[i].Finished || stalled[runs[i].ID]:
			keep[i] = true
		case others < KeepPerCell:
			keep[i] = true
			others++
		default:
			rest = append(rest, i)
		}
	}
	slices.SortStableFunc(rest, func(a, b int) int {
		ea, eb := runs[a].Elapsed(), runs[b].Elapsed()
		switch {
		case ea > eb:
			return -1
		case ea < eb:
			return 1
		}
		return 0
	})
	for _, i := range rest[:min(KeepSlowest, len(rest))] {
		keep[i] = true
	}
	var out []metrics.RunTimeline
	for i := range runs {
		if keep[i] {
			out = append(out, runs[i])
		}
	}
	return out
}

// CellRuns are one cell's kept runs as the store read them back.
type CellRuns struct {
	Cell CellInfo
	Runs []metrics.RunTimeline
}

// ReadStore reads the store at path. want selects runs by id (nil: every
// kept run); cells with no selected run are left out. A store whose last
// cell was cut short (a killed sweep) reads up to the cut. A run stored
// twice (a cell run again after a resume) is taken from its last cell.
func ReadStore(path string, want func(id string) bool) ([]CellRuns, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("timelines %s: %w", path, err)
	}
	dec := json.NewDecoder(zr)
	var out []CellRuns
	where := map[string][2]int{} // run id -> cell, index
	for {
		var r record
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || len(out) > 0 && isTorn(err) {
				break
			}
			return nil, fmt.Errorf("timelines %s: %w", path, err)
		}
		switch {
		case r.Cell != nil:
			out = append(out, CellRuns{Cell: *r.Cell})
		case r.Run != nil && len(out) > 0:
			if want != nil && !want(r.Run.ID) {
				continue
			}
			if r.Spans != nil {
				r.Run.Spans = r.Spans
			}
			if at, ok := where[r.Run.ID]; ok {
				cr := &out[at[0]]
				cr.Runs = slices.Delete(cr.Runs, at[1], at[1]+1)
				for id, w := range where {
					if w[0] == at[0] && w[1] > at[1] {
						where[id] = [2]int{w[0], w[1] - 1}
					}
				}
			}
			cr := &out[len(out)-1]
			where[r.Run.ID] = [2]int{len(out) - 1, len(cr.Runs)}
			cr.Runs = append(cr.Runs, *r.Run)
		}
	}
	return slices.DeleteFunc(out, func(c CellRuns) bool { return len(c.Runs) == 0 }), nil
}

// isTorn reports whether err is what a gzip member cut short gives (a
// corrupt checksum or header after the last whole line).
func isTorn(err error) bool {
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)
}

// withPath returns run with its critical path (metrics.RunPath) set, when
// it has one and its spans were recorded: the timeline keeps the path's
// segments, and its record every span they were found in (Recorded), so
// that a reader sees the path without walking it again.
func withPath(run metrics.RunTimeline) metrics.RunTimeline {
	if run.Path == nil && run.HasEngineSpans() {
		run.Path, _ = metrics.RunPath(&run)
	}
	return run
}
