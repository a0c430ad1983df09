// Command durabench is a load and benchmark generator for durable-workflow
// engines: it sweeps a matrix of scenarios × engine versions × kill switches
// × worlds, reports, compares and gates. This file holds flags and wiring
// only, exitcodes.go the exit codes; the logic lives in the packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/durabench/durabench/internal/sweep"
)

// usage is the text of `durabench help`. The README's CLI block is this text
// verbatim: after changing it, run
// go test ./cmd/durabench -run TestCLIDoc -update
const usage = `durabench — load and benchmark generator for durable-workflow engines

usage:
  durabench sweep   [flags | -f sweep.yaml]   run a matrix; writes DIR/results.json and DIR/report.md
  durabench report  FILE [--format text|md|github|json|benchfmt] [--baseline F [--null F2]] [--history DIR] [--png DIR]
  durabench report  FILE --runs ID,...|stalled|failed
                                            each run's critical path as a waterfall: its segments, categories and bars
  durabench report  FILE --format otlp [--runs ID,...|stalled|failed]
                                            the runs' timelines as OTLP/JSON traces (sweep --trace-dir DIR: all, as it goes)
  durabench report  --status running|failed [--commit SHA] [--run-url URL]
                                            sticky comment of a run without results
  durabench list    [--profile P [--faults F]] scenarios (options, types, defaults), versions, kill switches, worlds, profiles;
                                            with --profile, every number of that profile
  durabench compare BASE HEAD [--null BASE2] [--metrics LIST] [--format text|md|json]
  durabench compare FILE [--metrics LIST] [--format text|md|json]
                                            an interleaved sweep (sweep --interleave): its head side against its
                                            base side, block by block (paired test, CI and MDE)
  durabench gate    HEAD --baseline BASE [--null BASE2 [--again HEAD2]] [--rules FILE | --rule R ...] [--format text|md|json]
  durabench gate    FILE [--rules FILE | --rule R ...] [--format text|md|json]
                                            an interleaved sweep: its head side gated against its base side, paired
  durabench history add RESULTS --dir DIR
  durabench sim     [--seeds N] [--log mint-ordered,append-only] [--scenario P,...] [--versions V,...|all]
                    [--guard] [--profile P] [--faults F] [--format text|md] [--gate] [--replay SEED]
                                            explore seeds on the sim world and check the engine's invariants
  durabench worker  --nats-url URL [--concurrency N] [--id NAME]
                                            engine worker for sweep --workers external
  durabench target  serve reference [--world mem|nats] [--version V] [--procs N] [--addr HOST:PORT]
                                            serve the built-in engine over the target protocol (prints its URL)
  durabench target  check reference|NAME|URL [--runs N] [--run-timeout D] [--log FILE]
                                            conformance checker for a target: the built-in engine, an
                                            adapter (durabench-target-NAME) or a URL (exit 1: a check failed)
  durabench calibrate TABLE [--base PROFILE] [--seed N] [--out FILE] [--check]
                                            fit a latency/fault profile to observed figures on the sim world

durabench COMMAND -h lists every flag of a command.

exit codes: 0 ok · 1 a gate rule failed (or sim --gate found a violation, or target check a check) ·
2 usage or input error ·
3 the sweep itself failed (finished cells are kept) · 130 interrupted
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	code := -1
	switch args[0] {
	case "sweep":
		code, err = cmdSweep(ctx, args[1:], stdout, stderr)
	case "report":
		err = cmdReport(args[1:], stdout, stderr)
	case "list":
		err = cmdList(args[1:], stdout, stderr)
	case "compare":
		err = cmdCompare(args[1:], stdout, stderr)
	case "gate":
		code, err = cmdGate(args[1:], stdout, stderr)
	case "history":
		err = cmdHistory(args[1:], stdout, stderr)
	case "worker":
		code, err = cmdWorker(ctx, args[1:], stdout, stderr)
	case "sim":
		code, err = cmdSim(ctx, args[1:], stdout, stderr)
	case "target":
		code, err = cmdTarget(ctx, args[1:], stdout, stderr)
	case "calibrate":
		err = cmdCalibrate(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = usageErr("unknown command %q (sweep, report, list, compare, gate, history, sim, worker, target, calibrate)", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "durabench: "+oneLine(err))
	}
	if code >= 0 {
		return code
	}
	return exitCode(err)
}

// usageErr is a command-line mistake: its message is all that is printed
// (exit 2).
func usageErr(format string, a ...any) error {
	return &sweep.UsageError{Msg: fmt.Sprintf(format, a...)}
}

// oneLine keeps an error on one line of stderr.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// newFlagSet returns a flag set whose errors come back to the caller
// (printed once, as one line, by run) instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("durabench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args, allowing positional arguments among the flags
// ("report FILE --format md"); it returns the positionals.
func parse(fs *flag.FlagSet, args []string, help io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(help)
				fmt.Fprintf(help, "usage of %s:\n", fs.Name())
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usageErr("%s", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
