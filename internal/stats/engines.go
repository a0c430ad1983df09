package stats

import (
	"fmt"
	"slices"
	"strings"

	"github.com/durabench/durabench/results"
)

// selected is the target of cells SelectEngine keyed by their point alone:
// the two sides of an engine comparison key alike, and keys print no
// engine fields.
const selected = "\x00selected"

// EngineLabel names the engine a cell measured, as SelectEngine takes it:
// a foreign target's name, or "reference/VERSION" for the built-in engine.
func EngineLabel(c *results.Cell) string {
	if c.Target != "" {
		return c.Target
	}
	return "reference/" + c.Version
}

// SelectEngine returns a copy of f with only the cells of one engine —
// a target's name (its label), the target as the plan gave it (its
// TargetSpec: "workflow --sdk=head-tgz" selects the cells labelled
// "workflow 4.8.9+1f0c2a9e4b7d · local", whose hash CI cannot know
// beforehand), "reference/VERSION", or "reference" when the file has one
// version of the built-in engine — keyed by their point in the matrix alone
// (scenario, size, options): no target, version, switches, world or profile.
// Two files (or one file twice) selected for two engines then compare and
// gate cell by cell: engine against engine. More than one cell of the
// engine at one point (several worlds, switch sets) is an error naming it.
func SelectEngine(f *results.File, engine string) (*results.File, error) {
	out := *f
	out.Cells = nil
	seen := map[CellKey]string{}
	var engines []string
	for i := range f.Cells {
		c := f.Cells[i]
		label := EngineLabel(&c)
		if !slices.Contains(engines, label) {
			engines = append(engines, label)
		}
		if label != engine && (c.TargetSpec == "" || c.TargetSpec != engine) && !(engine == "reference" && c.Target == "") {
			continue
		}
		if c.Skipped != "" {
			continue
		}
		full := KeyOf(&c).String()
		c.Target, c.Version, c.Switches, c.World, c.Profile = selected, "", []string{}, "", ""
		k := KeyOf(&c)
		if prev, dup := seen[k]; dup {
			return nil, fmt.Errorf("engine %s has two cells at %s/%s (%s and %s): select one (e.g. reference/VERSION) or sweep one world and switch set",
				engine, c.Scenario, sizeOf(&c), prev, full)
		}
		seen[k] = full
		out.Cells = append(out.Cells, c)
	}
	if len(out.Cells) == 0 {
		return nil, fmt.Errorf("no cells of engine %q (the file has: %s)", engine, strings.Join(engines, ", "))
	}
	return &out, nil
}

func sizeOf(c *results.Cell) string {
	switch {
	case c.Branches > 0:
		return fmt.Sprintf("branches=%d", c.Branches)
	case c.Steps > 0:
		return fmt.Sprintf("steps=%d", c.Steps)
	}
	return "-"
}

// EngineTitle names the engine SelectEngine(f, engine) selects as reports
// show it: engine itself or, selected by a target's spec, the spec and the
// label its cells carry ("workflow --sdk=head-tgz (workflow
// 4.8.9+1f0c2a9e4b7d · local)"), so that two builds are never confused.
func EngineTitle(f *results.File, engine string) string {
	for i := range f.Cells {
		c := &f.Cells[i]
		if c.TargetSpec == engine && c.Target != "" && c.Target != engine {
			return fmt.Sprintf("%s (%s)", engine, c.Target)
		}
	}
	return engine
}
