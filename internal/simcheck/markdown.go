package simcheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/world/sim"
)

// MarkdownOptions shape the report section.
type MarkdownOptions struct {
	// Heading is the section heading (default "Sim World"); Level its depth
	// (default 3).
	Heading string
	Level   int
	// TraceLink turns a trace file path into a link target (nil: the path).
	TraceLink func(path string) string
	// MaxRows caps the failure rows listed per log model (default 25), so a
	// PR comment stays small.
	MaxRows int
}

// modelTitle is how a log model is named in reports.
func modelTitle(m sim.LogModel) string {
	switch m {
	case sim.MintOrdered:
		return "Mint-ordered log"
	case sim.AppendOnly:
		return "Append-only log"
	}
	return string(m) + " log"
}

// Summary is one line per log model: "🟠 Mint-ordered log — 6 fail of 41 total".
func (r Report) Summary() []string {
	out := make([]string, len(r.Models))
	for i, m := range r.Models {
		mark := "🟢"
		if len(m.Failures) > 0 {
			mark = "🟠"
		}
		out[i] = fmt.Sprintf("%s %s — %d fail of %d total", mark, modelTitle(m.Log), len(m.Failures), m.Total)
	}
	return out
}

// Markdown writes the report as a markdown section: per log model its
// "N fail of M total" line and, when it failed, a collapsed table of the
// failures with seed, scenario, version, violated invariant and trace link.
func (r Report) Markdown(w io.Writer, opt MarkdownOptions) error {
	if opt.Heading == "" {
		opt.Heading = "Sim World"
	}
	if opt.Level <= 0 {
		opt.Level = 3
	}
	if opt.MaxRows <= 0 {
		opt.MaxRows = 25
	}
	link := opt.TraceLink
	if link == nil {
		link = func(p string) string { return p }
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s %s\n\n", strings.Repeat("#", opt.Level), opt.Heading)
	fmt.Fprintf(bw, "Deterministic simulation: every case replays exactly from its seed (`durabench sim --replay SEED`).\n\n")
	summary := r.Summary()
	for i, m := range r.Models {
		fmt.Fprintf(bw, "**%s**\n\n", summary[i])
		if len(m.Failures) == 0 {
			continue
		}
		fmt.Fprintf(bw, "<details><summary>%d failing case(s)</summary>\n\n", len(m.Failures))
		fmt.Fprintf(bw, "| seed | scenario | version | invariant | detail | trace |\n|---:|---|---|---|---|---|\n")
		for k, f := range m.Failures {
			if k == opt.MaxRows {
				fmt.Fprintf(bw, "| … | %d more | | | | |\n", len(m.Failures)-k)
				break
			}
			v := f.Violations[0]
			trace := ""
			if f.TracePath != "" {
				trace = fmt.Sprintf("[trace](%s)", link(f.TracePath))
			}
			fmt.Fprintf(bw, "| %d | %s | %s | `%s` | %s | %s |\n", f.Seed, f.Scenario, f.Version, v.Invariant,
				cell(v.Detail), trace)
		}
		fmt.Fprintf(bw, "\n</details>\n\n")
	}
	return bw.Flush()
}

// cell makes text safe for one markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:157]) + "…"
	}
	return s
}
