package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/internal/target/check"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/registry"
)

// cmdTarget runs `durabench target serve|check`.
func cmdTarget(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	if len(args) == 0 {
		return -1, usageErr("target needs a subcommand: serve reference, or check reference|NAME|URL")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		// Both subcommands' flags.
		fmt.Fprintln(stdout, "durabench target serve reference [flags]:")
		_, _ = cmdTargetServe(ctx, []string{"-h"}, stdout, stdout)
		fmt.Fprintln(stdout, "durabench target check reference|NAME|URL [flags]:")
		_, _ = cmdTargetCheck(ctx, []string{"-h"}, stdout, stdout)
		return -1, flag.ErrHelp
	case "serve":
		return cmdTargetServe(ctx, args[1:], stdout, stderr)
	case "check":
		return cmdTargetCheck(ctx, args[1:], stdout, stderr)
	}
	return -1, usageErr("target %s: unknown subcommand (serve reference, or check reference|NAME|URL)", args[0])
}

// cmdTargetServe serves the built-in engine over the target protocol until
// SIGINT or SIGTERM; it prints its URL on stdout once it listens.
func cmdTargetServe(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("target serve", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	worldName := fs.String("world", "mem", "world the engine runs on")
	version := fs.String("version", "pending-count", "engine version")
	procs := fs.Int("procs", 0, "processors the target's Go runtime runs on (GOMAXPROCS; 0: every core; 1 leaves a driver on the same machine a core)")
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
	if err := protocol.SetProcs(*procs); err != nil {
		return -1, usageErr("%v", err)
	}
	kind, err := registry.Lookup(*worldName)
	if err != nil {
		return -1, usageErr("--world: %v", err)
	}
	if kind.VirtualTime {
		return -1, usageErr("--world %s: a target serves in real time; use mem or nats", *worldName)
	}
	w, err := kind.New(ctx, registry.Config{Options: world.Options{}, Settings: kind.Defaults(), SoleWriter: true})
	if err != nil {
		return exitFailed, fmt.Errorf("world %s: %w", *worldName, err)
	}
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := protocol.Serve(sctx, *addr, reference.New(w, v), stdout); err != nil {
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
	logFile := fs.String("log", "", "write an adapter's log (its stderr) to FILE")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) != 1 {
		return -1, usageErr("target check takes one target: reference, an adapter name ('NAME --flag=value' passes it flags) or a URL (http://host:port)")
	}
	if *runs < 1 || *timeout <= 0 {
		return -1, usageErr("--runs must be >= 1 and --run-timeout > 0")
	}
	spec, err := sweep.ParseTarget(pos[0])
	if err != nil {
		return -1, usageErr("%v", err)
	}
	base := spec.URL
	switch {
	case spec.IsReference():
		u, stop, err := serveReference(ctx)
		if err != nil {
			return exitFailed, err
		}
		defer stop()
		base = u
	case base == "":
		path, err := target.Find(spec.Name)
		if err != nil {
			return -1, usageErr("%v", err)
		}
		var logw io.Writer = io.Discard
		if *logFile != "" {
			f, err := os.Create(*logFile)
			if err != nil {
				return -1, usageErr("--log: %v", err)
			}
			defer f.Close()
			logw = f
		}
		pl, err := target.Launch(ctx, spec.Name, path, spec.Args, logw)
		if err != nil {
			return exitFailed, err
		}
		defer func() { _ = pl.Stop() }()
		base = pl.URL
	}
	c, err := target.NewClient(base)
	if err != nil {
		return -1, usageErr("%v", err)
	}
	rep, err := check.Run(ctx, c, check.Options{Runs: *runs, RunTimeout: *timeout})
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

// serveReference serves the built-in engine (pending-count on the mem
// world) over the protocol on a loopback port, for `target check
// reference`; stop shuts it down.
func serveReference(ctx context.Context) (url string, stop func(), err error) {
	kind, err := registry.Lookup("mem")
	if err != nil {
		return "", nil, err
	}
	w, err := kind.New(ctx, registry.Config{Settings: kind.Defaults(), SoleWriter: true})
	if err != nil {
		return "", nil, err
	}
	v, err := engine.LookupVersion("pending-count")
	if err != nil {
		_ = w.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- protocol.Serve(sctx, "127.0.0.1:0", reference.New(w, v), pw)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("serve reference: %w", <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(line), func() { cancel(); <-done }, nil
}
