package sweep

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Progress receives a sweep's progress. Run calls Start once, then per cell
// either CellDone with reused set, or CellStart, Run per finished run,
// and CellDone or CellFailed; Finish last. Run may be called from engine
// tasks and must not block.
type Progress interface {
	Start(cells []CellPlan, reused, runsPerCell int)
	CellStart(i int, c CellPlan)
	Run(p driver.CellProgress)
	CellDone(i int, c CellPlan, rc *results.Cell, reused bool)
	CellFailed(i int, c CellPlan, err error)
	Finish()
}

// NoProgress shows nothing (--quiet).
type NoProgress struct{}

func (NoProgress) Start([]CellPlan, int, int)                  {}
func (NoProgress) CellStart(int, CellPlan)                     {}
func (NoProgress) Run(driver.CellProgress)                     {}
func (NoProgress) CellDone(int, CellPlan, *results.Cell, bool) {}
func (NoProgress) CellFailed(int, CellPlan, error)             {}
func (NoProgress) Finish()                                     {}

// Summary is a finished cell in one line: TTLS p50 / p99 (TTC for
// scenarios without steps to time), stalls and errors.
func Summary(rc *results.Cell) string {
	if rc.Skipped != "" {
		// No run: no figure to show, only why.
		return "skipped: " + rc.Skipped
	}
	name, m, ok := "TTLS", rc.Metrics[metrics.TTLS], false
	if _, ok = rc.Metrics[metrics.TTLS]; !ok {
		name, m = "TTC", rc.Metrics[metrics.TTC]
	}
	s := fmt.Sprintf("%s p50 %s p99 %s, stalls %d", name, metrics.FormatMicros(float64(m.P50)),
		metrics.FormatMicros(float64(m.P99)), rc.Stalls)
	if rc.Errors > 0 {
		s += fmt.Sprintf(", errors %d", rc.Errors)
	}
	if rc.DriverLag != nil {
		s += ", driver lag p99 " + metrics.FormatMicros(float64(rc.DriverLag.P99))
	}
	if len(rc.Workers) > 0 {
		s += externalSummary(rc)
	}
	if inc := rc.WorldIncidents; inc != nil && inc.Total() > 0 {
		s += ", world incidents: " + inc.String()
	}
	return s
}

// Lines logs one plain line per finished cell: for output that is not a
// terminal (CI logs).
type Lines struct {
	W io.Writer
	// Every is how often a long cell reports its runs (default 10 s).
	Every time.Duration

	mu      sync.Mutex
	total   int
	start   time.Time
	cell    int
	label   string
	perCell int
	runs    int
	last    time.Time
}

func (l *Lines) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.W, format, a...)
}

// Start implements Progress.
func (l *Lines) Start(cells []CellPlan, reused, runsPerCell int) {
	l.total, l.start, l.perCell = len(cells), time.Now(), runsPerCell
	if reused > 0 {
		l.printf("sweep: %d cells, %d already done\n", len(cells), reused)
	} else {
		l.printf("sweep: %d cells, %d runs each\n", len(cells), runsPerCell)
	}
}

// CellStart implements Progress.
func (l *Lines) CellStart(i int, c CellPlan) {
	l.mu.Lock()
	l.cell, l.label, l.runs, l.last = i, c.Label(), 0, time.Now()
	l.mu.Unlock()
}

// Run implements Progress: a cell that runs long prints a line now and
// then, so a CI log shows it is alive.
func (l *Lines) Run(p driver.CellProgress) {
	if !p.Finished() {
		return // given up at the timeout: CellDone counts it as a stall
	}
	every := l.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	l.mu.Lock()
	l.runs++
	if time.Since(l.last) < every {
		l.mu.Unlock()
		return
	}
	l.last = time.Now()
	line := fmt.Sprintf("[%d/%d] %s: %d/%d runs\n", l.cell+1, l.total, l.label, l.runs, l.perCell)
	l.mu.Unlock()
	l.printf("%s", line)
}

// CellDone implements Progress.
func (l *Lines) CellDone(i int, c CellPlan, rc *results.Cell, reused bool) {
	tag := fmt.Sprintf("%.1fs", rc.ElapsedMS/1000)
	if reused {
		tag = "resumed"
	}
	l.printf("[%d/%d] %s: %s (%s)\n", i+1, l.total, c.Label(), Summary(rc), tag)
}

// CellFailed implements Progress.
func (l *Lines) CellFailed(i int, c CellPlan, err error) {
	l.printf("[%d/%d] %s: %v\n", i+1, l.total, c.Label(), err)
}

// Finish implements Progress.
func (l *Lines) Finish() {}

// Bars shows an overall bar with an ETA and one bar per running cell;
// a finished cell's bar is replaced by its one-line summary.
type Bars struct {
	W io.Writer
	// ForceTTY draws bars even when W is not a terminal (tests).
	ForceTTY bool

	p       *mpb.Progress
	overall *mpb.Bar
	cell    *mpb.Bar
	total   int
	perCell int

	mu       sync.Mutex
	done     int // cells finished
	cellRuns int // runs finished in the running cell
}

// Start implements Progress.
func (b *Bars) Start(cells []CellPlan, reused, runsPerCell int) {
	opts := []mpb.ContainerOption{mpb.WithOutput(b.W), mpb.WithWidth(100), mpb.WithRefreshRate(150 * time.Millisecond)}
	if b.ForceTTY {
		opts = append(opts, mpb.ForceTTY())
	}
	b.p = mpb.New(opts...)
	b.total, b.perCell = len(cells), runsPerCell
	// One more than the runs, so the bar (and with it the container) only
	// completes in Finish, after the last summary line is out.
	runs := int64((len(cells)-reused)*runsPerCell) + 1
	b.overall = b.p.AddBar(runs,
		mpb.BarPriority(1<<30), // stays at the bottom
		mpb.PrependDecorators(
			decor.Name("sweep ", decor.WC{W: 6}),
			decor.Any(func(decor.Statistics) string {
				b.mu.Lock()
				defer b.mu.Unlock()
				return fmt.Sprintf("%d/%d cells", b.done, b.total)
			}),
		),
		mpb.AppendDecorators(
			decor.Percentage(decor.WC{W: 5}),
			decor.Name(" ETA "),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO), "done"),
		),
	)
}

// CellStart implements Progress.
func (b *Bars) CellStart(i int, c CellPlan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cellRuns = 0
	b.cell = b.p.AddBar(int64(max(b.perCell, 1)),
		mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(decor.Name(fmt.Sprintf("[%d/%d] %s ", i+1, b.total, c.Label()))),
		mpb.AppendDecorators(decor.CountersNoUnit("%d/%d runs"), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)),
	)
}

// Run implements Progress.
func (b *Bars) Run(p driver.CellProgress) {
	b.mu.Lock()
	cell := b.cell
	if cell != nil {
		b.cellRuns++
	}
	// An interleaved pair with --precision may run more than the plan's
	// runs: the bars stay at their totals (the cell's line says how many).
	over := b.cellRuns > b.perCell
	b.mu.Unlock()
	if cell == nil || over {
		return
	}
	// Warm-ups and measured runs share the cell's bar.
	cell.IncrBy(1)
	b.overall.IncrBy(1)
}

// CellDone implements Progress.
func (b *Bars) CellDone(i int, c CellPlan, rc *results.Cell, reused bool) {
	b.endCell()
	b.mu.Lock()
	b.done++
	b.mu.Unlock()
	tag := fmt.Sprintf("%.1fs", rc.ElapsedMS/1000)
	if reused {
		tag = "resumed"
	}
	fmt.Fprintf(b.p, "[%d/%d] %s: %s (%s)\n", i+1, b.total, c.Label(), Summary(rc), tag)
}

// CellFailed implements Progress.
func (b *Bars) CellFailed(i int, c CellPlan, err error) {
	b.endCell()
	fmt.Fprintf(b.p, "[%d/%d] %s: %v\n", i+1, b.total, c.Label(), err)
}

func (b *Bars) endCell() {
	b.mu.Lock()
	cell := b.cell
	b.cell = nil
	// Runs given up at the timeout never reported: count them now.
	missing := b.perCell - b.cellRuns
	b.cellRuns = b.perCell
	b.mu.Unlock()
	if cell != nil {
		if missing > 0 {
			b.overall.IncrBy(missing)
		}
		cell.Abort(true) // removes the bar; the summary line replaces it
	}
}

// Finish implements Progress.
func (b *Bars) Finish() {
	b.endCell()
	b.overall.SetTotal(-1, true) // complete at the current count
	b.p.Wait()
}
