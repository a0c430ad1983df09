package main

import (
	"io"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

// cmdCompare runs `durabench compare BASE HEAD`.
func cmdCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", stderr)
	format := fs.String("format", "text", "text, md or json")
	nullPath := fs.String("null", "", "a second sweep of the baseline (same commit, machine and settings): each row shows its Δ against BASE, the change noise alone makes")
	engines := addEngineFlags(fs)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("compare needs BASE and HEAD results files, got %d", len(pos))
	}
	if err := textMDOrJSON(*format); err != nil {
		return err
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
	opt := stats.CompareOptions{Null: null, NullLabel: "null"}
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
	switch *format {
	case "text":
		return c.WriteText(stdout)
	case "json":
		return c.WriteJSON(stdout)
	}
	return c.WriteMarkdown(stdout)
}
