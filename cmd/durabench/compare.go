package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

// cmdCompare runs `durabench compare BASE HEAD`.
func cmdCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", stderr)
	format := fs.String("format", "text", "text, md or json")
	nullPath := fs.String("null", "", "a second sweep of the baseline (same commit, machine and settings): each row shows its Δ against BASE, the change noise alone makes")
	metricList := fs.String("metrics", "", "compare only these metrics, comma-separated (ttls,ttc,…; critical_path: every category of the TTLS path, "+
		"critical_path_ttc: of the path to completion, which is left out otherwise; critical_path.queue_wait: one)")
	engines := addEngineFlags(fs)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 && len(pos) != 2 {
		return usageErr("compare needs BASE and HEAD results files (or one interleaved sweep's), got %d", len(pos))
	}
	if err := textMDOrJSON(*format); err != nil {
		return err
	}
	only, err := compareMetrics(*metricList)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if *nullPath != "" || *engines.base != "" || *engines.head != "" {
			return usageErr("compare FILE compares an interleaved sweep's two sides; --null, --base-engine and --head-engine compare two files")
		}
		return compareSides(pos[0], *format, only, stdout)
	}
	base, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	head, err := results.Read(pos[1])
	if err != nil {
		return err
	}
	null, err := engines.readNull(*nullPath)
	if err != nil {
		return err
	}
	opt := stats.CompareOptions{Null: null, NullLabel: "null", Metrics: only}
	if *engines.base != "" {
		opt.BaseLabel, opt.HeadLabel = stats.EngineTitle(base, *engines.base), stats.EngineTitle(head, *engines.head)
	}
	if base, head, err = engines.apply(base, head); err != nil {
		return err
	}
	c, err := stats.Compare(base, head, opt)
	if err != nil {
		return err
	}
	return writeComparison(c, format, stdout)
}

func writeComparison(c *stats.Comparison, format *string, stdout io.Writer) error {
	switch *format {
	case "text":
		return c.WriteText(stdout)
	case "json":
		return c.WriteJSON(stdout)
	}
	return c.WriteMarkdown(stdout)
}

// compareSides runs `durabench compare FILE`: an interleaved sweep's head
// side against its base side, pair by pair.
func compareSides(path, format string, only []string, stdout io.Writer) error {
	f, err := results.Read(path)
	if err != nil {
		return err
	}
	base, head, missing, err := splitSides(path, f)
	if err != nil {
		return err
	}
	c, err := stats.Compare(base.File, head.File, stats.CompareOptions{BaseLabel: base.label, HeadLabel: head.label, Metrics: only})
	if err != nil {
		return err
	}
	c.Warnings = append(c.Warnings, missing...)
	return writeComparison(c, &format, stdout)
}

// side is one side of an interleaved sweep, with its label.
type side struct {
	*results.File
	label string
}

// splitSides is stats.SplitSides of the file at path, a usage error when
// it is not an interleaved sweep; missing are warnings naming the cells
// left out (no partner in the file).
func splitSides(path string, f *results.File) (base, head side, missing []string, err error) {
	if !stats.Interleaved(f) {
		return side{}, side{}, nil, usageErr("%s is not an interleaved sweep (sweep --interleave): give BASE and HEAD (gate: --baseline)", path)
	}
	b, h, bl, hl, gone, err := stats.SplitSides(f)
	if err != nil {
		return side{}, side{}, nil, err
	}
	if len(gone) > 0 {
		missing = append(missing, fmt.Sprintf("%d cell(s) without a partner in the file, not compared: %s", len(gone), strings.Join(gone, ", ")))
	}
	return side{b, bl}, side{h, hl}, missing, nil
}

// compareMetrics reads compare's --metrics (names stats.KnownMetric
// knows); nil when list is empty.
func compareMetrics(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !stats.KnownMetric(name) {
			return nil, usageErr("--metrics: unknown metric %q (a metric of durabench list, critical_path, critical_path_ttc, or critical_path.<category>)", name)
		}
		out = append(out, name)
	}
	return out, nil
}
