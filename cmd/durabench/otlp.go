package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durabench/durabench/reporters/traces"
	"github.com/durabench/durabench/results"
)

// otlpReport writes the timelines of the selected runs of the sweep whose
// results are at path as one OTLP/JSON traces document. The timelines come
// from the file the sweep kept beside its results (traces.StoreName).
// sel is a comma-separated list of run ids and the words stalled and
// failed; empty selects every run the sweep kept.
func otlpReport(path string, f *results.File, sel string, stdout io.Writer) error {
	stalled, failed := map[string]bool{}, map[string]bool{}
	for _, c := range f.Cells {
		for _, s := range c.StalledRuns {
			stalled[s.Run] = true
		}
		for _, r := range c.FailedRuns {
			failed[r.Run] = true
		}
	}
	ids := map[string]bool{}
	var words []string
	for _, w := range strings.Split(sel, ",") {
		switch w = strings.TrimSpace(w); w {
		case "":
		case "stalled", "failed":
			words = append(words, w)
		default:
			ids[w] = true
		}
	}
	want := func(id string) bool {
		if len(ids) == 0 && len(words) == 0 {
			return true
		}
		return ids[id] || slices.Contains(words, "stalled") && stalled[id] || slices.Contains(words, "failed") && failed[id]
	}
	store := filepath.Join(filepath.Dir(path), traces.StoreName)
	cells, err := traces.ReadStore(store, want)
	if errors.Is(err, fs.ErrNotExist) {
		return usageErr("--format otlp: no %s beside %s (durabench sweep keeps its runs' timelines there; an older durabench did not)", traces.StoreName, path)
	}
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, c := range cells {
		for _, r := range c.Runs {
			found[r.ID] = true
		}
	}
	var lost []string
	for id := range ids {
		if !found[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		return usageErr("--runs: %s not among the runs %s keeps (every stalled or failed run, the first %d and the %d slowest of each cell)",
			strings.Join(lost, ", "), store, traces.KeepPerCell, traces.KeepSlowest)
	}
	if len(cells) == 0 {
		return usageErr("--runs %s: the sweep has no such run", sel)
	}
	if err := traces.WriteCells(stdout, cells); err != nil {
		return fmt.Errorf("--format otlp: %w", err)
	}
	return nil
}
