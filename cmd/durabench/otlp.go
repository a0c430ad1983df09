package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/reporters/traces"
	"github.com/durabench/durabench/results"
)

// otlpReport writes the timelines of the selected runs of the sweep whose
// results are at path as one OTLP/JSON traces document.
func otlpReport(path string, f *results.File, sel string, stdout io.Writer) error {
	cells, err := keptRuns(path, f, sel, "--format otlp")
	if err != nil {
		return err
	}
	if err := traces.WriteCells(stdout, cells); err != nil {
		return fmt.Errorf("--format otlp: %w", err)
	}
	return nil
}

// waterfallReport draws the critical path of each selected run of the
// sweep whose results are at path (reporters.Waterfall), a blank line
// between runs.
func waterfallReport(path string, f *results.File, sel string, stdout io.Writer) error {
	cells, err := keptRuns(path, f, sel, "--runs")
	if err != nil {
		return err
	}
	first := true
	for _, c := range cells {
		for i := range c.Runs {
			if !first {
				fmt.Fprintln(stdout)
			}
			first = false
			if err := reporters.Waterfall(stdout, c.Cell.Label, &c.Runs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// keptRuns reads the timelines of the selected runs of the sweep whose
// results are at path from the file the sweep kept beside its results
// (traces.StoreName). sel is a comma-separated list of run ids and the
// words stalled and failed; empty selects every run the sweep kept. what
// names the flag in an error.
func keptRuns(path string, f *results.File, sel, what string) ([]traces.CellRuns, error) {
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
		return nil, usageErr("%s: no %s beside %s (durabench sweep keeps its runs' timelines there; an older durabench did not)", what, traces.StoreName, path)
	}
	if err != nil {
		return nil, err
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
		return nil, usageErr("--runs: %s not among the runs %s keeps (every stalled or failed run, the first %d and the %d slowest of each cell)",
			strings.Join(lost, ", "), store, traces.KeepPerCell, traces.KeepSlowest)
	}
	if len(cells) == 0 {
		return nil, usageErr("--runs %s: the sweep has no such run", sel)
	}
	return cells, nil
}
