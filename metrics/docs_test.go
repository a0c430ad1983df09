package metrics_test

import (
	"os"
	"strings"
	"testing"

	"github.com/durabench/durabench/metrics"
)

// TestDocsQuoteTheDefinitions: docs/engine.md's metrics table says exactly
// what metrics.Definitions (and so every report footer) says.
func TestDocsQuoteTheDefinitions(t *testing.T) {
	doc, err := os.ReadFile("../docs/engine.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range metrics.Definitions {
		row := "| " + d.Short + " (" + d.Title + ") | `" + d.Name + "` | " + d.Definition + " | " + d.Sample + " | " +
			string(d.Better) + ": " + d.Why + " |"
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/engine.md has no row\n%s", row)
		}
	}
}
