package reporters

import (
	"bytes"
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
)

func TestTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Text(&buf, fixtureHead(), Options{Baseline: fixtureBase()}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	golden(t, "report.txt", buf.Bytes())
	for _, want := range []string{"fanout\n", "sequential\n", "TTLS p50", "TTFS p50", "stalls", "errors", "256 br · resilient", "50 steps · pending-count"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	// Every row of a table has the same width: the columns line up.
	for _, table := range strings.Split(out, "\n\n") {
		lines := strings.Split(strings.TrimSpace(table), "\n")[1:]
		if len(lines) == 0 { // a note
			continue
		}
		for _, l := range lines[1:] {
			if len([]rune(l)) != len([]rune(lines[0])) {
				t.Errorf("misaligned row %q (header %q)", l, lines[0])
			}
		}
	}
}

func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, fixtureHead()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "{\n  \"schema\": \"durabench/results/v1\"") {
		t.Errorf("JSON output starts %q", buf.String()[:60])
	}
}

// TestTextSkippedCells: a skipped cell's row has no figure, and the table
// says once per reason why those rows are empty.
func TestTextSkippedCells(t *testing.T) {
	f := fixtureHead()
	why := "workflow 5.0.0-beta.55 has no world-postgres"
	for _, i := range []int{0, 1} {
		c := f.Cells[i]
		c.Skipped, c.Runs, c.Stalls, c.Errors = why, 0, 0, 0
		c.Metrics = map[string]results.Metric{}
		f.Cells[i] = c
	}
	var buf bytes.Buffer
	if err := Text(&buf, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "skipped (the rows with 0 runs): "+why+"\n"); n != 1 {
		t.Errorf("the reason is said %d times, want once:\n%s", n, buf.String())
	}
}

// TestSpansOffSaysSo: a sweep that recorded no spans (--spans off) has no
// critical path, and the text and markdown reports say why rather than
// leave the table out silently.
func TestSpansOffSaysSo(t *testing.T) {
	f := fixtureHead()
	f.Plan.Spans = results.SpansOff
	for i := range f.Cells {
		f.Cells[i].CriticalPath = nil
	}
	var text bytes.Buffer
	if err := Text(&text, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "where the time went: not recorded (sweep --spans off") {
		t.Errorf("the text report does not say spans were off:\n%s", text.String())
	}
	var md bytes.Buffer
	if err := Markdown(&md, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "**Where the time went** — not recorded (sweep --spans off") {
		t.Errorf("the markdown report does not say spans were off:\n%s", md.String())
	}
	// With spans on, a cell without a path (none in the fixture's
	// sequential cells) gets no such note.
	f.Plan.Spans = ""
	text.Reset()
	if err := Text(&text, f, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "not recorded") {
		t.Errorf("spans on, yet the report says they were not recorded:\n%s", text.String())
	}
}

// TestPathCostNote: under the table of where the time went, a report of
// built-in engine runs on mem says that the spans' recording is part of
// their times (on mem it is a measurable part); on another world, or on a
// virtual clock, it says nothing of the kind.
func TestPathCostNote(t *testing.T) {
	const note = "on mem, recording the spans is part of each run's times"
	// both renders f as text and as markdown.
	both := func(f *results.File) (string, string) {
		var text bytes.Buffer
		if err := Text(&text, f, Options{}); err != nil {
			t.Fatal(err)
		}
		return text.String(), render(t, f, Options{})
	}
	text, md := both(fixtureHead())
	if !strings.Contains(text, "\nnote: "+note) || !strings.Contains(md, "_"+note) {
		t.Errorf("a report of runs on mem does not say what recording spans costs there:\n%s", text)
	}
	for _, other := range []func(f *results.File){
		func(f *results.File) { // on NATS
			for i := range f.Cells {
				f.Cells[i].World = "nats"
			}
		},
		func(f *results.File) { f.VirtualTime = true }, // on a virtual clock
	} {
		f := fixtureHead()
		other(f)
		if text, md := both(f); strings.Contains(text+md, note) {
			t.Errorf("a report of runs not on mem in real time says what recording spans costs there:\n%s", text)
		}
	}
}
