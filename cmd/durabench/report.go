package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/results"
)

// historyDepth is how many earlier sweeps a report shows.
const historyDepth = 10

// cmdReport runs `durabench report`: renders a results file (text, md,
// github, json, benchfmt, PNG charts), or with --status the sticky comment
// of a run without results.
func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", stderr)
	format := fs.String("format", "text", "text, md, github, json, benchfmt or otlp (the runs' timelines as OTLP/JSON traces)")
	runs := fs.String("runs", "", "run ids (comma-separated), or stalled, failed: each run's critical path as a waterfall (text), or with --format otlp its timeline (default: every run the sweep kept)")
	baseline := fs.String("baseline", "", "results file to compare with")
	null := fs.String("null", "", "with --baseline: a second sweep of the baseline; rows show its null Δ")
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
	case "text", "md", "markdown", "github", "json", "benchfmt", "otlp":
	default:
		return usageErr("--format %s: not text, md, github, json, benchfmt or otlp", *format)
	}
	if *runs != "" && *format != "otlp" && *format != "text" {
		return usageErr("--runs goes with --format text (the runs' critical paths as waterfalls) or otlp")
	}
	f, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	if *format == "otlp" {
		return otlpReport(pos[0], f, *runs, stdout)
	}
	if *runs != "" {
		if *baseline != "" || *null != "" || *history != "" || *png != "" {
			return usageErr("--runs draws runs' critical paths: --baseline, --null, --history and --png do not go with it")
		}
		return waterfallReport(pos[0], f, *runs, stdout)
	}
	opt := reporters.Options{}
	if opt.Baseline, err = readBaseline(*baseline); err != nil {
		return err
	}
	if *null != "" && opt.Baseline == nil {
		return usageErr("--null is a second sweep of the baseline; give --baseline too")
	}
	if opt.Null, err = readBaseline(*null); err != nil {
		return err
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
