package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/simcheck"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// cmdSim explores seeds on the sim world and checks the engine's invariants
// after every run, per log model; --replay re-runs one case exactly.
func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("sim", stderr)
	seeds := fs.Int("seeds", 20, "seeds to explore per log model × scenario × version")
	first := fs.Int64("first-seed", 1, "first seed")
	logs := fs.String("log", "mint-ordered,append-only", "log models: mint-ordered, append-only")
	scen := fs.String("scenario", "", "programs to run, comma-separated (default: all of "+strings.Join(simScenarioNames(), ", ")+")")
	versions := fs.String("versions", "", "engine versions, comma-separated, or all (default: all but baseline-serial)")
	guard := fs.Bool("guard", false, "the world enforces the precondition guard")
	retry := fs.String("retry-style", "redeliver", "redeliver or fresh")
	vt := fs.Duration("visibility-timeout", world.DefaultVisibilityTimeout, "visibility timeout")
	prof := fs.String("profile", "", "latency/fault profile ("+strings.Join(profile.Names(), ", ")+" or a file); default: 1–5 ms jitter per call")
	faults := fs.String("faults", "", "profile overrides, e.g. step_created.transient=2% (implies faults are expected)")
	atPosition := fs.Bool("pending-at-position", false, "a mint-ordered log counts pending steps only up to the appended position (instead of an atomic counter)")
	replay := fs.Int64("replay", 0, "replay one seed (with exactly one --log, --scenario and --versions) and write its trace")
	out := fs.String("out", "", "trace directory (default out/sim-<time>/traces)")
	format := fs.String("format", "text", "text or md")
	parallel := fs.Int("parallel", 2, "cases run at once")
	gate := fs.Bool("gate", false, "exit 1 when any case breaks an invariant")
	for _, a := range args {
		// --workers names where a sweep's engine runs; sim's count of cases
		// at once was renamed --parallel.
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); a != name && name == "workers" {
			return -1, usageErr("sim --workers is now --parallel (cases run at once)")
		}
	}
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) > 0 {
		return -1, usageErr("sim takes no arguments (got %q)", pos[0])
	}
	if *seeds < 1 {
		return -1, usageErr("--seeds %d: want at least 1", *seeds)
	}
	if *format != "text" && *format != "md" {
		return -1, usageErr("--format %q: want text or md", *format)
	}
	cfg := simcheck.Config{Seeds: *seeds, FirstSeed: *first, Parallel: *parallel, PendingAtCommit: !*atPosition}
	if cfg.Logs, err = simcheck.ParseLogs(*logs); err != nil {
		return -1, usageErr("--log: %v", err)
	}
	for _, name := range splitList(*scen) {
		s, err := simcheck.LookupScenario(name)
		if err != nil {
			return -1, usageErr("--scenario: %v", err)
		}
		cfg.Scenarios = append(cfg.Scenarios, s)
	}
	if *versions == "all" {
		cfg.Versions = engine.Versions()
	} else {
		for _, name := range splitList(*versions) {
			v, err := engine.LookupVersion(name)
			if err != nil {
				return -1, usageErr("--versions: %v", err)
			}
			cfg.Versions = append(cfg.Versions, v)
		}
	}
	if *retry != string(world.Redeliver) && *retry != string(world.Fresh) {
		return -1, usageErr("--retry-style %q: want redeliver or fresh", *retry)
	}
	if *vt <= 0 {
		return -1, usageErr("--visibility-timeout %v: want a positive duration", *vt)
	}
	cfg.Options = world.Options{Guard: *guard, RetryStyle: world.RetryStyle(*retry), VisibilityTimeout: *vt}
	if *prof != "" || *faults != "" {
		p, err := profile.Resolve(*prof, *faults, nil)
		if err != nil {
			flag := "--profile"
			if pe := (*profile.Error)(nil); errors.As(err, &pe) && pe.Override != "" {
				flag = "--faults"
			}
			return -1, fmt.Errorf("%s: %w", flag, err)
		}
		cfg.FaultInjected = *faults != ""
		cfg.Latency = func(world.Op, *rand.Rand) time.Duration { return 0 }
		cfg.Wrap = func(w world.World, seed int64) world.World { return profile.Wrap(w, p, seed) }
	}
	cfg.TraceDir = *out
	if cfg.TraceDir == "" {
		cfg.TraceDir = filepath.Join("out", "sim-"+time.Now().UTC().Format("20060102T150405Z"), "traces")
	}

	if isFlagSet(fs, "replay") {
		if len(cfg.Logs) != 1 || len(cfg.Scenarios) != 1 || len(cfg.Versions) != 1 {
			return -1, usageErr("--replay needs exactly one --log, --scenario and --versions")
		}
		c := simcheck.Case{Seed: *replay, Log: cfg.Logs[0], Scenario: cfg.Scenarios[0].Name, Version: cfg.Versions[0].Name}
		r, err := simcheck.Replay(ctx, cfg, c)
		if err != nil {
			return -1, err
		}
		verdict := "ok: every invariant held"
		if r.Failed() {
			verdict = fmt.Sprintf("FAIL: %d invariant(s) broken", len(r.Violations))
		}
		fmt.Fprintf(stdout, "%s: %s (TTC %v)\n", c, verdict, r.TTC)
		for _, v := range r.Violations {
			fmt.Fprintf(stdout, "  %s\n", v)
		}
		fmt.Fprintf(stdout, "trace: %s\n", r.TracePath)
		if r.Failed() && *gate {
			return exitRegression, nil
		}
		return exitOK, nil
	}

	rep, err := simcheck.Explore(ctx, cfg)
	if err != nil {
		return -1, err
	}
	if *format == "md" {
		err = rep.Markdown(stdout, simcheck.MarkdownOptions{})
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return -1, err
	}
	if rep.Failed() > 0 && *gate {
		return exitRegression, nil
	}
	return exitOK, nil
}

// simScenarioNames lists the explorer's programs.
func simScenarioNames() []string {
	var names []string
	for _, s := range simcheck.DefaultScenarios() {
		names = append(names, s.Name)
	}
	return names
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// isFlagSet reports whether the named flag was given.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
