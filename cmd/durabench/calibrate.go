package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/durabench/durabench/internal/calibrate"
	"github.com/durabench/durabench/world/profile"
)

// cmdCalibrate runs `durabench calibrate TABLE`: it fits a profile to a
// table of observed figures on the sim world and writes it, or with --check
// measures one against the table.
func cmdCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("calibrate", stderr)
	base := fs.String("base", "cloud", "profile the search starts from, a name or a file (its ops, groups and shapes are kept); with --check, the profile measured")
	seed := fs.Int64("seed", 1, "plan seed of every measured cell (the search is deterministic for it)")
	out := fs.String("out", "", "file the fitted profile is written to (default: the table's profile name + .yaml)")
	check := fs.Bool("check", false, "measure --base against the table and print the residuals; no search, nothing written")
	format := fs.String("format", "text", "--check's table: text or md")
	parallel := fs.Int("parallel", runtime.GOMAXPROCS(0), "cells measured at once")
	maxEvals := fs.Int("max-evals", calibrate.DefaultMaxEvals, "profiles measured at most")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("calibrate needs one table of observed figures (e.g. examples/published.yaml), got %d arguments", len(pos))
	}
	if *parallel < 1 {
		return usageErr("--parallel %d: want at least 1", *parallel)
	}
	if *maxEvals < 1 {
		return usageErr("--max-evals %d: want at least 1", *maxEvals)
	}
	if err := textOrMD(*format); err != nil {
		return err
	}
	if *format != "text" && !*check {
		return usageErr("--format applies to --check only")
	}
	table, err := calibrate.ReadFile(pos[0])
	if err != nil {
		return err
	}
	path := *out
	if path == "" {
		path = table.Profile + ".yaml"
	}
	if d, err := os.Stat(filepath.Dir(path)); !*check && (err != nil || !d.IsDir()) {
		return usageErr("--out %s: no folder %s to write it in", path, filepath.Dir(path))
	}
	if a, err := os.Stat(path); err == nil && !*check {
		if b, err := os.Stat(pos[0]); err == nil && os.SameFile(a, b) {
			return usageErr("--out %s is the table itself: name another file", path)
		}
	}
	prof, err := profile.Load(*base)
	if err != nil {
		return fmt.Errorf("--base: %w", err)
	}
	if *check {
		res, err := calibrate.Check(ctx, table, prof, *base, *seed, *parallel)
		if err != nil {
			return err
		}
		if *format != "text" {
			return res.WriteMarkdown(stdout)
		}
		within, fitted := res.Counts()
		fmt.Fprintf(stdout, "%s against %s (sim, seed %d): %d of %d fitted figures within ±%.0f%%\n\n",
			prof.Label(), table.File, *seed, within, fitted, 100*calibrate.Tolerance)
		return res.WriteResiduals(stdout, false)
	}

	start := time.Now()
	cfg := calibrate.Config{Base: prof, Seed: *seed, Parallel: *parallel, MaxEvals: *maxEvals}
	if !*quiet {
		cfg.Log = func(format string, a ...any) {
			fmt.Fprintf(stderr, "calibrate: %5.1fs "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
		}
	}
	res, err := calibrate.Fit(ctx, table, cfg)
	if err != nil {
		return err
	}
	command := "durabench calibrate " + pos[0]
	if isFlagSet(fs, "base") && *base != "cloud" {
		command += " --base " + *base
	}
	if *seed != 1 {
		command += " --seed " + strconv.FormatInt(*seed, 10)
	}
	data := profile.Format(res.Profile, res.Header(command))
	within, fitted := res.Counts()
	fmt.Fprintf(stdout, "fitted %s to %s on the sim world (seed %d, %d profiles measured in %s): %d of %d fitted figures within ±%.0f%%\n\n",
		res.Profile.Name, table.File, *seed, res.Evals, time.Since(start).Round(time.Second), within, fitted, 100*calibrate.Tolerance)
	stdout.Write(profile.Format(res.Profile, ""))
	fmt.Fprintln(stdout)
	if err := res.WriteParams(stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := res.WriteResiduals(stdout, true); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stdout, "\nprofile: %s\n", path)
	return nil
}
