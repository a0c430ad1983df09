package main

import (
	"fmt"
	"strings"

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
