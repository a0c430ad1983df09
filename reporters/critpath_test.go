package reporters

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// withCompletion gives every cell of f a path to completion: its critical
// path and a tail of write after it (the terminal write and what the
// engine did before it), tail of each run's TTLS for the versions in
// long, 2% for the others.
func withCompletion(f *results.File, tail float64, long ...string) {
	wi, _ := metrics.CategoryIndex(metrics.CatWrite)
	for i := range f.Cells {
		c := &f.Cells[i]
		if len(c.CriticalPath) == 0 {
			continue
		}
		share := 0.02
		if slices.Contains(long, c.Version) {
			share = tail
		}
		path := make([]results.PathCategory, len(c.CriticalPath))
		var total []int64
		for j, pc := range c.CriticalPath {
			pc.Values = slices.Clone(pc.Values)
			path[j] = pc
			for r, v := range pc.Values {
				if j == 0 {
					total = append(total, 0)
				}
				total[r] += v
			}
		}
		for r := range total {
			path[wi].Values[r] += int64(float64(total[r]) * share)
		}
		vs := slices.Sorted(slices.Values(path[wi].Values))
		path[wi].P50, path[wi].P90 = metrics.Quantile(vs, 50), metrics.Quantile(vs, 90)
		path[wi].Mean = float64(sum(vs)) / float64(len(vs))
		c.CompletionPath = path
	}
}

// TestCompletionPathTable: the reports split the TTC of the cells whose
// runs are recorded done well after their last step — a second table,
// its TTC mean the sum of its categories — and of no other cell.
func TestCompletionPathTable(t *testing.T) {
	f := fixtureHead()
	withCompletion(f, 0.5, "baseline")
	var text bytes.Buffer
	if err := Text(&text, f, Options{}); err != nil {
		t.Fatal(err)
	}
	md := render(t, f, Options{})
	for name, out := range map[string]string{"text": text.String(), "markdown": md} {
		_, table, ok := strings.Cut(out, "time to completion went")
		if !ok {
			t.Fatalf("%s: no table of the path to completion:\n%s", name, out)
		}
		// The table: after its title's line, up to the next blank line.
		lines := strings.Split(table, "\n")[1:]
		for len(lines) > 0 && lines[0] == "" {
			lines = lines[1:]
		}
		if i := slices.Index(lines, ""); i >= 0 {
			lines = lines[:i]
		}
		table = strings.Join(lines, "\n")
		rows := 0
		for _, line := range lines {
			switch {
			case strings.Contains(line, "· resilient") || strings.Contains(line, "· pending-count"):
				t.Errorf("%s: a cell whose runs end with their last step is in the table: %q", name, line)
			case strings.Contains(line, "· baseline"):
				rows++
			}
		}
		if rows == 0 {
			t.Errorf("%s: the baseline cells, recorded done 50%% after their last step, are not in the table:\n%s", name, table)
		}
		if !strings.Contains(table, "TTC mean*") {
			t.Errorf("%s: the table has no TTC mean* column", name)
		}
	}
	// Each shown cell's TTC mean is its categories' sum: 1.5 × its TTLS mean.
	for i := range f.Cells {
		c := &f.Cells[i]
		if c.Version == "baseline" && len(c.CompletionPath) > 0 {
			if got, ttls := pathTotal(ttcPath, c), pathTotal(ttlsPath, c); got < 1.49*ttls || got > 1.51*ttls {
				t.Errorf("%v: TTC mean* %.0f for a TTLS mean* %.0f", c.Version, got, ttls)
			}
			if !strings.Contains(text.String(), metrics.FormatMicros(pathTotal(ttcPath, c))) {
				t.Errorf("%s %d br: TTC mean* %s not in the table", c.Version, c.Branches, metrics.FormatMicros(pathTotal(ttcPath, c)))
			}
		}
	}

	plain := fixtureHead()
	withCompletion(plain, 0.05, "baseline")
	text.Reset()
	if err := Text(&text, plain, Options{}); err != nil {
		t.Fatal(err)
	}
	if out := text.String() + render(t, plain, Options{}); strings.Contains(out, "time to completion went") {
		t.Errorf("runs recorded done 5%% after their last step get a table of their path to completion")
	}
}

// TestCompletionPathWithoutTTLS: a cell of a scenario that reports TTC
// but no TTLS (here the fixture's sequence, its critical path moved to
// its path to completion) gets the table of its path to completion in
// the text report as in the markdown one.
func TestCompletionPathWithoutTTLS(t *testing.T) {
	f := fixtureHead()
	var donor []results.PathCategory
	for i := range f.Cells {
		if len(f.Cells[i].CriticalPath) > 0 {
			donor = f.Cells[i].CriticalPath
			break
		}
	}
	seq := 0
	for i := range f.Cells {
		if c := &f.Cells[i]; c.Scenario == "sequential" {
			c.CriticalPath, c.CompletionPath = nil, donor
			seq++
		}
	}
	if seq == 0 || donor == nil {
		t.Fatal("the fixture has no sequence, or no critical path")
	}
	var text bytes.Buffer
	if err := Text(&text, f, Options{}); err != nil {
		t.Fatal(err)
	}
	md := render(t, f, Options{})
	for name, out := range map[string]string{"text": text.String(), "markdown": md} {
		_, after, ok := strings.Cut(out, "time to completion went")
		if !ok || !strings.Contains(after, "50 steps · baseline") {
			t.Errorf("%s: no table of the sequence's path to completion:\n%s", name, out)
		}
	}
}
