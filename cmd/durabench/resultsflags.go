package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

// Helpers shared by the commands that read results files: report, compare,
// gate.

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, "; ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// textOrMD checks a --format that takes text or md (markdown is md's alias).
func textOrMD(format string) error {
	if format != "text" && format != "md" && format != "markdown" {
		return usageErr("--format %s: not text or md", format)
	}
	return nil
}

// textMDOrJSON checks a --format of compare and gate.
func textMDOrJSON(format string) error {
	if format != "json" {
		if err := textOrMD(format); err != nil {
			return usageErr("--format %s: not text, md or json", format)
		}
	}
	return nil
}

// readNull reads the --null results file (a second sweep of the
// baseline) and selects the base engine in it as in the baseline; nil
// when path is empty.
func (e engineFlags) readNull(path string) (*results.File, error) {
	f, err := readBaseline(path)
	if err != nil || f == nil || *e.base == "" {
		return f, err
	}
	n, err := stats.SelectEngine(f, *e.base)
	if err != nil {
		return nil, usageErr("--null with --base-engine %s: %v", *e.base, err)
	}
	return n, nil
}

// readBaseline reads the --baseline results file; nil when path is empty.
func readBaseline(path string) (*results.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := results.Read(path)
	if err != nil {
		return nil, fmt.Errorf("--baseline: %w", err)
	}
	return f, nil
}

// engineFlags are compare's and gate's --base-engine and --head-engine:
// compare one engine's cells against another's (stats.SelectEngine).
type engineFlags struct{ base, head *string }

func addEngineFlags(fs *flag.FlagSet) engineFlags {
	return engineFlags{
		base: fs.String("base-engine", "", "compare only this engine's cells of the base file: a target name (its label, or the target as --targets gave it), reference/VERSION, or reference (with --head-engine)"),
		head: fs.String("head-engine", "", "compare only this engine's cells of the head file (with --base-engine)"),
	}
}

// apply selects the engines on both sides; files without the flags are
// returned as they are.
func (e engineFlags) apply(base, head *results.File) (*results.File, *results.File, error) {
	if *e.base == "" && *e.head == "" {
		return base, head, nil
	}
	if *e.base == "" || *e.head == "" || base == nil {
		return nil, nil, usageErr("--base-engine and --head-engine go together, with a baseline")
	}
	b, err := stats.SelectEngine(base, *e.base)
	if err != nil {
		return nil, nil, usageErr("--base-engine %s: %v", *e.base, err)
	}
	h, err := stats.SelectEngine(head, *e.head)
	if err != nil {
		return nil, nil, usageErr("--head-engine %s: %v", *e.head, err)
	}
	return b, h, nil
}
