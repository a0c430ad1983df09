package simcheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/world/sim"
)

// ParseLogs parses a comma-separated list of log models
// ("mint-ordered,append-only").
func ParseLogs(s string) ([]sim.LogModel, error) {
	var out []sim.LogModel
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		m, err := sim.ParseLogModel(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("simcheck: no log model in %q", s)
	}
	return out, nil
}

// WriteText writes the report for a terminal: per log model its summary
// line, then one line per failure with its seed, case, first violation and
// trace file.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	summary := r.Summary()
	for i, m := range r.Models {
		fmt.Fprintln(bw, summary[i])
		for _, f := range m.Failures {
			fmt.Fprintf(bw, "  seed %-4d %-12s %-18s %s\n", f.Seed, f.Scenario, f.Version, f.Violations[0])
			for _, v := range f.Violations[1:] {
				fmt.Fprintf(bw, "  %35s %s\n", "", v)
			}
			if f.TracePath != "" {
				fmt.Fprintf(bw, "  %35s trace: %s\n", "", f.TracePath)
			}
		}
	}
	return bw.Flush()
}
