package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/target"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/worlds"
)

// cmdTarget runs `durabench target serve|check`.
func cmdTarget(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	if len(args) == 0 {
		return -1, usageErr("target needs a subcommand: serve reference, or check URL")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		// Both subcommands' flags.
		fmt.Fprintln(stdout, "durabench target serve reference [flags]:")
		_, _ = cmdTargetServe(ctx, []string{"-h"}, stdout, stdout)
		fmt.Fprintln(stdout, "durabench target check URL [flags]:")
		_, _ = cmdTargetCheck(ctx, []string{"-h"}, stdout, stdout)
		return -1, flag.ErrHelp
	case "serve":
		return cmdTargetServe(ctx, args[1:], stdout, stderr)
	case "check":
		return cmdTargetCheck(ctx, args[1:], stdout, stderr)
	}
	return -1, usageErr("target %s: unknown subcommand (serve reference, or check URL)", args[0])
}

// cmdTargetServe serves the built-in engine over the target protocol until
// SIGINT or SIGTERM; it prints its URL on stdout once it listens.
func cmdTargetServe(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("target serve", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	worldName := fs.String("world", "mem", "world the engine runs on")
	version := fs.String("version", "pending-count", "engine version")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) != 1 || pos[0] != "reference" {
		return -1, usageErr("target serve takes one engine: reference")
	}
	v, err := engine.LookupVersion(*version)
	if err != nil {
		return -1, usageErr("--version: %v", err)
	}
	kind, err := worlds.Lookup(*worldName)
	if err != nil {
		return -1, usageErr("--world: %v", err)
	}
	if kind.VirtualTime {
		return -1, usageErr("--world %s: a target serves in real time; use mem or nats", *worldName)
	}
	w, err := kind.New(ctx, worlds.Config{Options: world.Options{}, Settings: kind.Defaults(), SoleWriter: true})
	if err != nil {
		return exitFailed, fmt.Errorf("world %s: %w", *worldName, err)
	}
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := target.Serve(sctx, *addr, target.NewReference(w, v), stdout); err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "listen" {
			return -1, usageErr("--addr %s: %v", *addr, err)
		}
		return exitFailed, err
	}
	return exitOK, nil
}

// cmdTargetCheck runs the conformance checker against a target: exit 0
// when every check passes, 1 when one fails, 2 when the target cannot be
// reached or is not a target.
func cmdTargetCheck(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("target check", stderr)
	runs := fs.Int("runs", 3, "runs per scenario")
	timeout := fs.Duration("run-timeout", 30*time.Second, "how long one run may take")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) != 1 {
		return -1, usageErr("target check takes one target URL (http://host:port)")
	}
	if *runs < 1 || *timeout <= 0 {
		return -1, usageErr("--runs must be >= 1 and --run-timeout > 0")
	}
	c, err := target.NewClient(pos[0])
	if err != nil {
		return -1, usageErr("%v", err)
	}
	rep, err := target.Check(ctx, c, target.CheckOptions{Runs: *runs, RunTimeout: *timeout})
	if err != nil {
		return -1, usageErr("target %s: %v", pos[0], err)
	}
	if err := rep.Write(stdout); err != nil {
		return exitFailed, err
	}
	if !rep.Passed() {
		return exitRegression, nil
	}
	return exitOK, nil
}
