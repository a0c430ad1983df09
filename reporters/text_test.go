package reporters

import (
	"bytes"
	"strings"
	"testing"
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
