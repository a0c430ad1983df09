package reporters

import (
	"bytes"
	"strings"
	"testing"

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
