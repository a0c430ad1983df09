package reporters

import (
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
)

// TestMarkdownNamesTheWorkers: a distributed cell's report names each
// worker with its clock offset, the steps it ran and whether it was lost,
// and the cell's redeliveries.
func TestMarkdownNamesTheWorkers(t *testing.T) {
	f := fixtureHead()
	c := &f.Cells[0]
	c.Workers = []string{"host-a", "host-b"}
	c.Redeliveries = 12
	c.WorkerStats = []results.WorkerStat{
		{Worker: "host-a", OffsetUS: -574403.5, RTTUS: 225.8, Steps: 179},
		{Worker: "host-b", OffsetUS: 1200, RTTUS: 127.6, Steps: 90, Lost: true},
	}
	var sb strings.Builder
	if err := Markdown(&sb, f, Options{}); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"👷 **Workers**", "`host-a` (offset -574.4ms ± 112.9µs, 179 steps)",
		"`host-b` (offset +1.200ms ± 63.80µs, 90 steps, lost)", "12 redeliveries"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
