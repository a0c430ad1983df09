package reporters

import (
	"bytes"
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
)

// TestWorldIncidentsShown: a cell whose world had incidents shows them in
// the text table (a column of its own) and in the markdown report (a line
// next to stalls and errors, with the last asynchronous error); a report
// whose cells had none shows neither.
func TestWorldIncidentsShown(t *testing.T) {
	clean := fixtureHead()
	var tb bytes.Buffer
	if err := Text(&tb, clean, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb.String(), "world incidents") || strings.Contains(render(t, clean, Options{}), "World incidents") {
		t.Fatal("a report without world incidents mentions them")
	}

	f := fixtureHead()
	f.Cells[0].WorldIncidents = &world.Incidents{Dropped: 3, Transient: 2, Last: "nats: slow consumer, messages dropped"}
	tb.Reset()
	if err := Text(&tb, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "world incidents") {
		t.Fatalf("text report has no world incidents column:\n%s", tb.String())
	}
	var row string
	for _, l := range strings.Split(tb.String(), "\n") {
		if strings.Contains(l, f.Cells[0].Version) && strings.HasSuffix(strings.TrimSpace(l), " 5") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no row ends with the cell's 5 incidents:\n%s", tb.String())
	}
	md := render(t, f, Options{})
	if !strings.Contains(md, "**World incidents**") || !strings.Contains(md, "3 dropped, 2 transient") ||
		!strings.Contains(md, "last: nats: slow consumer") {
		t.Fatalf("markdown report does not show the incidents:\n%s", md)
	}
}

// TestCellTimeoutCutSaid: a cell the cell timeout ended with runs still
// to measure says so in the text and markdown reports — how many it cut,
// unfinished and never started, over how many runs the figures are, and
// the flag that gives them time — for its stalls are not the engine's
// stall rate; a cell whose stalls all finished (late) gets no such line.
func TestCellTimeoutCutSaid(t *testing.T) {
	f := fixtureHead()
	f.Plan.CellTimeoutMS = 60_000
	c := &f.Cells[0]
	c.Runs = 10
	c.StalledRuns = []results.StalledRun{
		{Run: "r1", TTLSMS: 900, Finished: true},
		{Run: "r2", TTLSMS: 19_600},
		{Run: "r3", NotStarted: true},
		{Run: "r4", NotStarted: true},
	}
	c.Stalls = len(c.StalledRuns)
	want := "the cell timeout (1m0s) cut 3 of 10 runs, counted as stalls: 1 unfinished (TTLS: the elapsed time at the cut, a lower bound), " +
		"2 never started (the figures are over the 8 that did); raise --cell-timeout to measure them"
	var tb bytes.Buffer
	if err := Text(&tb, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "warning: ") || !strings.Contains(tb.String(), want) {
		t.Fatalf("text report does not say what the cell timeout cut:\n%s", tb.String())
	}
	if md := render(t, f, Options{}); !strings.Contains(md, want) {
		t.Fatalf("markdown report does not say what the cell timeout cut:\n%s", md)
	}

	c.StalledRuns = c.StalledRuns[:1] // a late run, finished: nothing cut
	c.Stalls = 1
	tb.Reset()
	if err := Text(&tb, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if md := render(t, f, Options{}); strings.Contains(tb.String()+md, "--cell-timeout") {
		t.Fatalf("a cell whose stalls all finished is said to be cut:\n%s\n%s", tb.String(), md)
	}
}
