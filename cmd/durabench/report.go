package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/sweep"
	"github.com/durabench/durabench/world/profile"
)

// historyDepth is how many earlier sweeps a report shows.
const historyDepth = 10

func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", stderr)
	format := fs.String("format", "text", "text, md, github, json or benchfmt")
	baseline := fs.String("baseline", "", "results file to compare with")
	history := fs.String("history", "", "history directory (durabench history add) for previous results")
	png := fs.String("png", "", "also write PNG charts into DIR")
	status := fs.String("status", "", "running or failed: write the GitHub sticky comment for a run without results (no results file)")
	commit := fs.String("commit", "", "with --status: the commit being benchmarked")
	runURL := fs.String("run-url", "", "with --status: the CI run's address, linked from the comment")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if *status != "" {
		return statusComment(*status, *format, *commit, *runURL, pos, stdout)
	}
	if *commit != "" || *runURL != "" {
		return usageErr("--commit and --run-url go with --status")
	}
	if len(pos) != 1 {
		return usageErr("report needs exactly one results file, got %d", len(pos))
	}
	switch *format {
	case "text", "md", "markdown", "github", "json", "benchfmt":
	default:
		return usageErr("--format %s: not text, md, github, json or benchfmt", *format)
	}
	f, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	opt := reporters.Options{}
	if *baseline != "" {
		if opt.Baseline, err = results.Read(*baseline); err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
	}
	if *history != "" {
		if opt.History, err = results.LoadHistory(*history, historyDepth); err != nil {
			return fmt.Errorf("--history: %w", err)
		}
	}
	// Render into memory first: a failure leaves no half-written report.
	var buf strings.Builder
	switch *format {
	case "text":
		err = reporters.Text(&buf, f, opt)
	case "md", "markdown":
		err = reporters.Markdown(&buf, f, opt)
	case "github":
		opt.GitHub = true
		err = reporters.Markdown(&buf, f, opt)
	case "json":
		err = reporters.JSON(&buf, f)
	case "benchfmt":
		err = reporters.Benchfmt(&buf, f)
	}
	if err != nil {
		return err
	}
	if *png != "" {
		files, err := reporters.PNG(*png, f, opt.Baseline)
		if err != nil {
			return fmt.Errorf("--png: %w", err)
		}
		defer func() {
			for _, p := range files {
				fmt.Fprintf(stderr, "chart: %s\n", p)
			}
		}()
	}
	_, err = io.WriteString(stdout, buf.String())
	return err
}

// statusComment writes the sticky comment of a run that has no results:
// --status running when the job starts, --status failed when it broke.
func statusComment(status, format, commit, runURL string, pos []string, stdout io.Writer) error {
	st := reporters.Status(status)
	if st != reporters.StatusRunning && st != reporters.StatusFailed {
		return usageErr("--status %s: not running or failed (a completed comment is rendered from a results file)", status)
	}
	if len(pos) != 0 {
		return usageErr("report --status takes no results file, got %q", pos[0])
	}
	if format != "github" && format != "text" {
		return usageErr("--status writes a GitHub comment: --format %s is not github", format)
	}
	var buf strings.Builder
	if err := reporters.StatusComment(&buf, st, commit, runURL); err != nil {
		return err
	}
	_, err := io.WriteString(stdout, buf.String())
	return err
}

func cmdList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stderr)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("list takes no arguments")
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIOS (--scenario NAME, --option name=value)")
	for _, s := range scenarios.All() {
		fmt.Fprintf(w, "  %s — %s\n", s.Name, s.Description)
		for _, o := range s.Options {
			typ := string(o.Type)
			if len(o.Choices) > 0 {
				typ = strings.Join(o.Choices, "|")
			}
			fmt.Fprintf(tw, "      %s\t%s\tdefault %s\t%s\n", o.Name, typ, o.Default, o.Help)
		}
		tw.Flush()
		fmt.Fprintf(w, "      metrics: %s\n", strings.Join(s.Metrics, ", "))
	}
	fmt.Fprintln(w, "\nVERSIONS (--versions NAME,...|all; a sweep file can define more as feature sets)")
	for _, v := range engine.Versions() {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.Features)
		fmt.Fprintf(tw, "  \t%s\n", v.Description)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nKILL SWITCHES (--switches none,NAME=VALUE; join several in one set with +)")
	for _, s := range engine.KnownSwitches() {
		fmt.Fprintf(tw, "  %s=%s\t%s\n", s.Name, s.Values, s.Effect)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nWORLDS (--world NAME,...)")
	worldHelp := map[string]string{
		"nats": "NATS JetStream: embedded in-process (default), or an external server/cluster with --nats-url",
		"mem":  "in-process maps and channels: the floor for engine overhead",
		"sim":  "deterministic discrete-event simulation in virtual time (--sim-log append-only|mint-ordered)",
	}
	for _, name := range sweep.KnownWorlds() {
		fmt.Fprintf(tw, "  %s\t%s\n", name, worldHelp[name])
	}
	tw.Flush()
	fmt.Fprintln(w, "\nPROFILES (--profile NAME|FILE, --faults OP.FIELD=VALUE,...)")
	for _, name := range profile.Names() {
		desc := ""
		if p, err := profile.Load(name); err == nil {
			desc = p.Description
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, desc)
	}
	return tw.Flush()
}

func cmdCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", stderr)
	format := fs.String("format", "text", "text or md")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("compare needs BASE and HEAD results files, got %d", len(pos))
	}
	if *format != "text" && *format != "md" && *format != "markdown" {
		return usageErr("--format %s: not text or md", *format)
	}
	base, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	head, err := results.Read(pos[1])
	if err != nil {
		return err
	}
	c, err := results.Compare(base, head, results.CompareOptions{})
	if err != nil {
		return err
	}
	if *format == "text" {
		return c.WriteText(stdout)
	}
	return c.WriteMarkdown(stdout)
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, "; ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func cmdGate(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("gate", stderr)
	baseline := fs.String("baseline", "", "baseline results file (needed by relative rules)")
	rulesFile := fs.String("rules", "", "rules file, one rule per line")
	var inline multi
	fs.Var(&inline, "rule", "a rule, e.g. 'ttls{branches=256}.p90 < 1.10x baseline' (repeatable)")
	format := fs.String("format", "text", "text or md")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) != 1 {
		return -1, usageErr("gate needs exactly one HEAD results file, got %d", len(pos))
	}
	if *format != "text" && *format != "md" && *format != "markdown" {
		return -1, usageErr("--format %s: not text or md", *format)
	}
	var rules []results.Rule
	if *rulesFile != "" {
		fh, err := os.Open(*rulesFile)
		if err != nil {
			return -1, usageErr("--rules: %v", err)
		}
		defer fh.Close()
		if rules, err = results.ParseRules(*rulesFile, fh); err != nil {
			return -1, err
		}
	}
	for _, r := range inline {
		rule, err := results.ParseRule(r)
		if err != nil {
			return -1, err
		}
		rules = append(rules, rule)
	}
	if len(rules) == 0 {
		rules = results.DefaultRules()
	}
	head, err := results.Read(pos[0])
	if err != nil {
		return -1, err
	}
	var base *results.File
	if *baseline != "" {
		if base, err = results.Read(*baseline); err != nil {
			return -1, fmt.Errorf("--baseline: %w", err)
		}
	}
	rep, err := results.Gate(head, base, rules)
	if err != nil {
		return -1, err
	}
	if *format == "text" {
		err = rep.WriteText(stdout)
	} else {
		err = rep.WriteMarkdown(stdout)
	}
	if err != nil {
		return -1, err
	}
	if gerr := rep.Err(); gerr != nil {
		fmt.Fprintln(stderr, "durabench: "+oneLine(gerr))
	}
	return rep.ExitCode(), nil
}

func cmdHistory(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		return usageErr("history: want `history add RESULTS --dir DIR`")
	}
	fs := newFlagSet("history add", stderr)
	dir := fs.String("dir", "", "history directory")
	pos, err := parse(fs, args[1:], stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *dir == "" {
		return usageErr("history add needs one results file and --dir DIR")
	}
	f, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	if f.Partial {
		return fmt.Errorf("%s: partial results (%s) are not history: %w", pos[0], f.Error, results.ErrInvalid)
	}
	path, err := results.AddHistory(*dir, f)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}
