package main

import (
	"fmt"
	"io"
	"os"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

// cmdGate runs `durabench gate`: checks HEAD (against --baseline) with the
// rules; its exit code is the gate's.
func cmdGate(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("gate", stderr)
	baseline := fs.String("baseline", "", "baseline results file (needed by relative rules; an interleaved sweep's own base side without it)")
	rulesFile := fs.String("rules", "", "rules file, one rule per line")
	var inline multi
	fs.Var(&inline, "rule", "a rule, e.g. 'ttls{branches=256}.p90 < 1.10x baseline' (repeatable)")
	format := fs.String("format", "text", "text, md or json")
	nullPath := fs.String("null", "", "a second sweep of the baseline (same commit, machine and settings): a relative rule fails only beyond its spread")
	againPath := fs.String("again", "", "with --null: the head swept a second time after the null sweep (ABAB); a relative rule fails only when the second pair (null → again, base as its null) fails too")
	engines := addEngineFlags(fs)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) != 1 {
		return -1, usageErr("gate needs exactly one HEAD results file, got %d", len(pos))
	}
	if err := textMDOrJSON(*format); err != nil {
		return -1, err
	}
	var rules []stats.Rule
	if *rulesFile != "" {
		fh, err := os.Open(*rulesFile)
		if err != nil {
			return -1, usageErr("--rules: %v", err)
		}
		defer fh.Close()
		if rules, err = stats.ParseRules(*rulesFile, fh); err != nil {
			return -1, err
		}
	}
	for _, r := range inline {
		rule, err := stats.ParseRule(r)
		if err != nil {
			return -1, err
		}
		rules = append(rules, rule)
	}
	if len(rules) == 0 {
		rules = stats.DefaultRules()
	}
	head, err := results.Read(pos[0])
	if err != nil {
		return -1, err
	}
	base, err := readBaseline(*baseline)
	if err != nil {
		return -1, err
	}
	var missing, labels []string
	if base == nil && stats.Interleaved(head) {
		// One interleaved sweep: its head side against its base side.
		if *nullPath != "" || *againPath != "" || *engines.base != "" || *engines.head != "" {
			return -1, usageErr("gate FILE of an interleaved sweep gates its two sides; --null, --again and the engine flags need --baseline")
		}
		b, h, gone, err := splitSides(pos[0], head)
		if err != nil {
			return -1, err
		}
		base, head, missing, labels = b.File, h.File, gone, []string{b.label, h.label}
	}
	if base, head, err = engines.apply(base, head); err != nil {
		return -1, err
	}
	null, err := engines.readNull(*nullPath)
	if err != nil {
		return -1, err
	}
	var rep *stats.GateReport
	if *againPath != "" {
		if null == nil {
			return -1, usageErr("--again is the head swept after the null sweep (ABAB); give --null too")
		}
		again, rerr := results.Read(*againPath)
		if rerr != nil {
			return -1, rerr
		}
		if *engines.head != "" {
			if again, err = stats.SelectEngine(again, *engines.head); err != nil {
				return -1, usageErr("--again with --head-engine %s: %v", *engines.head, err)
			}
		}
		rep, err = stats.GateRepeat(head, base, null, again, rules)
	} else {
		rep, err = stats.GateNull(head, base, null, rules)
	}
	if err != nil {
		return -1, err
	}
	rep.Warnings = append(rep.Warnings, missing...)
	if labels != nil {
		rep.Base.Label, rep.Head.Label = labels[0], labels[1]
	}
	switch *format {
	case "text":
		err = rep.WriteText(stdout)
	case "json":
		err = rep.WriteJSON(stdout)
	default:
		err = rep.WriteMarkdown(stdout)
	}
	if err != nil {
		return -1, err
	}
	if gerr := rep.Err(); gerr != nil {
		fmt.Fprintln(stderr, "durabench: "+oneLine(gerr))
	}
	return gateExitCode(rep), nil
}
