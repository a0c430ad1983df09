package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/reporters"
)

func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("sweep", stderr)
	pf := sweep.BindFlags(fs)
	out := fs.String("out", "", "output directory (default out/sweep-<time>; with --resume, the resumed directory)")
	resume := fs.String("resume", "", "finish the interrupted sweep in DIR: run only its missing cells")
	quiet := fs.Bool("quiet", false, "no progress and no table: print only the output paths")
	progress := fs.String("progress", "auto", "auto (bars on a terminal, lines otherwise), bars, lines or none")
	obs := bindObservers(fs)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) > 0 {
		return -1, usageErr("sweep takes no arguments, got %q (flags start with --)", pos[0])
	}
	// Everything is validated before anything runs.
	plan, err := pf.Plan()
	if err != nil {
		return -1, err
	}
	switch *progress {
	case "auto", "bars", "lines", "none":
	default:
		return -1, usageErr("--progress %s: not auto, bars, lines or none", *progress)
	}
	dir := *out
	if *resume != "" {
		if dir != "" && filepath.Clean(dir) != filepath.Clean(*resume) {
			return -1, usageErr("--out %s and --resume %s: a resumed sweep writes into the directory it resumes", dir, *resume)
		}
		if st, err := os.Stat(*resume); err != nil || !st.IsDir() {
			return -1, usageErr("--resume %s: not a sweep directory", *resume)
		}
		dir = *resume
	}
	if dir == "" {
		dir = filepath.Join("out", "sweep-"+time.Now().UTC().Format("20060102-150405"))
	}
	cells, err := plan.Cells()
	if err != nil {
		return -1, err
	}
	if err := plan.Probe(ctx); err != nil {
		return -1, err
	}
	if err := obs.start(dir, stderr); err != nil {
		return -1, err
	}
	defer obs.close()

	// The first Ctrl-C (or SIGTERM) interrupts the sweep gracefully; once it
	// is caught, a second one kills the process the default way.
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Closed (before stop) when the sweep returns: stop then ends sctx too,
	// and that is no interruption (a sweep that failed with exit 3 printed
	// "interrupted" after its error).
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		select {
		case <-sctx.Done():
		case <-returned:
			return
		}
		stop()
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "durabench: interrupted: letting runs in flight finish (up to %v); Ctrl-C again to abort\n", plan.Grace)
		}
	}()

	var prog sweep.Progress
	mode := *progress
	if *quiet {
		mode = "none"
	}
	if mode == "auto" {
		mode = "lines"
		if f, ok := stdout.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			mode = "bars"
		}
	}
	switch mode {
	case "bars":
		prog = &sweep.Bars{W: stdout, ForceTTY: *progress == "bars"}
	case "lines":
		prog = &sweep.Lines{W: stdout}
	default:
		prog = sweep.NoProgress{}
	}
	prog = obs.wrap(prog)
	res, err := sweep.Run(sctx, sweep.Config{Plan: plan, Out: dir, Resume: *resume != "", Progress: prog})
	if res == nil {
		return -1, err
	}
	resultsPath := res.ResultsPath
	for _, note := range res.Kept {
		fmt.Fprintln(stderr, "durabench: "+note)
	}
	switch {
	case errors.Is(err, sweep.ErrInterrupted):
		fmt.Fprintf(stderr, "durabench: interrupted: %d of %d cells finished; partial results in %s\n",
			len(res.File.Cells), len(cells), resultsPath)
		fmt.Fprintf(stderr, "durabench: resume with: durabench %s --resume %s\n", resumeArgs(args), dir)
		return exitInterrupted, nil
	case err != nil:
		fmt.Fprintln(stderr, "durabench: "+oneLine(err))
		fmt.Fprintf(stderr, "durabench: %d of %d cells finished and kept in %s\n", len(res.File.Cells), len(cells), resultsPath)
		return exitCode(err), nil
	}
	if !*quiet {
		fmt.Fprintln(stdout)
		if err := reporters.Text(stdout, res.File, reporters.Options{}); err != nil {
			return -1, err
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "results: %s\nreport:  %s\n", resultsPath, res.ReportPath)
	return exitOK, nil
}

// resumeArgs is the sweep command line without --out/--resume, to print
// how to resume. A password or token is printed <hidden>, a URL without
// its credentials: give them again.
func resumeArgs(args []string) string {
	out := []string{"sweep"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			if n == "out" || n == "resume" {
				continue
			}
			a = a[:len(a)-len(v)] + sweep.PrintableFlag(n, v)
		} else if a != name && (name == "out" || name == "resume") {
			i++
			continue
		} else if a != name && i+1 < len(args) && sweep.PrintableFlag(name, args[i+1]) != args[i+1] {
			out = append(out, a)
			i++
			a = sweep.PrintableFlag(name, args[i])
		}
		if strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
