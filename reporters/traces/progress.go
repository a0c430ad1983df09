package traces

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Writer is a sweep.Progress that keeps each cell's measured runs as the
// driver reports them and, when the cell ends, appends the ones to keep to
// the Store file and, with a Dir, writes every run's trace there. It holds
// one cell's timelines at a time (what the driver holds anyway) and writes
// a run's spans one run at a time, so memory stays bounded whatever the
// sweep's size. A write that fails is reported to Warn and the sweep goes
// on: traces never cost a measurement.
type Writer struct {
	// Store is the timelines file (StoreName in the sweep's directory);
	// empty: none.
	Store string
	// Dir receives one OTLP/JSON Lines file per cell (one line per run);
	// empty: none.
	Dir string
	// Warn receives write failures (nil: ignored).
	Warn func(error)

	mu  sync.Mutex
	cur *cellBuf
}

type cellBuf struct {
	plan    sweep.CellPlan
	started time.Time
	epoch   time.Time // zero until a finished run anchors it
	runs    []metrics.RunTimeline
}

// Progress returns a sweep.Progress feeding r and passing every event on to
// next (nil: none).
func (r *Writer) Progress(next sweep.Progress) sweep.Progress {
	if next == nil {
		next = sweep.NoProgress{}
	}
	return &recProgress{r: r, next: next}
}

type recProgress struct {
	r    *Writer
	next sweep.Progress
}

func (p *recProgress) Start(cells []sweep.CellPlan, reused, runsPerCell int) {
	if reused == 0 && p.r.Store != "" {
		// A fresh sweep (or a resume with nothing to keep): no earlier
		// sweep's runs in the store.
		if err := os.Remove(p.r.Store); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.r.warn(err)
		}
	}
	if p.r.Dir != "" {
		if err := os.MkdirAll(p.r.Dir, 0o755); err != nil {
			p.r.warn(fmt.Errorf("--trace-dir: %w", err))
		}
	}
	p.next.Start(cells, reused, runsPerCell)
}

func (p *recProgress) CellStart(i int, c sweep.CellPlan) {
	p.r.mu.Lock()
	p.r.cur = &cellBuf{plan: c, started: time.Now()}
	p.r.mu.Unlock()
	p.next.CellStart(i, c)
}

func (p *recProgress) Run(ev driver.CellProgress) {
	if !ev.Warmup && ev.Run != nil {
		now := time.Now()
		p.r.mu.Lock()
		if cb := p.r.cur; cb != nil {
			cb.runs = append(cb.runs, *ev.Run)
			if cb.epoch.IsZero() && ev.Run.Finished && !cb.plan.World.VirtualTime {
				// The run finished on the runtime clock just now: that
				// pins the clock's time 0 to the wall clock.
				cb.epoch = now.Add(-ev.Run.Done)
			}
		}
		p.r.mu.Unlock()
	}
	p.next.Run(ev)
}

func (p *recProgress) CellDone(i int, c sweep.CellPlan, rc *results.Cell, reused bool) {
	p.r.mu.Lock()
	cb := p.r.cur
	p.r.cur = nil
	p.r.mu.Unlock()
	if cb != nil && !reused {
		p.r.cellDone(i, cb, rc)
	}
	p.next.CellDone(i, c, rc, reused)
}

func (p *recProgress) CellFailed(i int, c sweep.CellPlan, err error) {
	p.r.mu.Lock()
	p.r.cur = nil
	p.r.mu.Unlock()
	p.next.CellFailed(i, c, err)
}

func (p *recProgress) Finish() { p.next.Finish() }

func (r *Writer) warn(err error) {
	if r.Warn != nil {
		r.Warn(err)
	}
}

// CellOf describes a planned cell and what it measured for its traces.
func CellOf(c sweep.CellPlan, rc *results.Cell, epoch time.Time) CellInfo {
	attrs := map[string]string{"scenario": rc.Scenario, "target": "reference"}
	if c.Target != nil {
		// Another engine: no version, switches or world of durabench's.
		attrs["target"] = c.Target.Name
		attrs["engine"], attrs["engine_version"] = rc.Engine, rc.EngineVersion
	} else {
		attrs["version"], attrs["switches"] = rc.Version, c.Switches.String()
		attrs["world"], attrs["profile"] = rc.World, rc.Profile
	}
	if rc.Branches > 0 {
		attrs["branches"] = strconv.Itoa(rc.Branches)
	}
	if rc.Steps > 0 {
		attrs["steps"] = strconv.Itoa(rc.Steps)
	}
	for k, v := range rc.Options {
		attrs["option."+k] = v
	}
	return CellInfo{Label: c.Label(), Key: c.Key, Attributes: attrs, Epoch: epoch, Virtual: c.World.VirtualTime,
		Program: c.Program, Incidents: rc.WorldIncidents}
}

func (r *Writer) cellDone(i int, cb *cellBuf, rc *results.Cell) {
	epoch := cb.epoch
	if epoch.IsZero() {
		epoch = cb.started // virtual time, or no run finished
	}
	cell := CellOf(cb.plan, rc, epoch)
	runs := cb.runs
	// Run order ("…-r0002" before "…-r0010", and "…-r9999" before "…-r10000").
	slices.SortFunc(runs, func(a, b metrics.RunTimeline) int {
		return cmp.Or(cmp.Compare(len(a.ID), len(b.ID)), strings.Compare(a.ID, b.ID))
	})
	if r.Store != "" {
		stalled := map[string]bool{}
		for _, s := range rc.StalledRuns {
			stalled[s.Run] = true
		}
		if err := AppendCell(r.Store, cell, Keep(runs, stalled)); err != nil {
			r.warn(err)
		}
	}
	if r.Dir != "" {
		path := filepath.Join(r.Dir, fmt.Sprintf("%03d-%s.otlp.jsonl", i+1, cb.plan.Hash))
		if err := writeLines(path, cell, runs); err != nil {
			r.warn(fmt.Errorf("--trace-dir: %w", err))
		}
	}
}

// writeLines writes one OTLP/JSON traces document per run, a line each
// (the OTLP file exporter's JSON Lines).
func writeLines(path string, cell CellInfo, runs []metrics.RunTimeline) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	for i := range runs {
		data := &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{Spans(cell, runs[i:i+1])}}
		if err = WriteJSON(bw, data); err != nil {
			break
		}
	}
	return errors.Join(err, bw.Flush(), f.Close())
}
