package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/durabench/durabench/internal/cluster"
	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/registry"
)

// cmdWorker runs `durabench worker`: an engine worker for sweeps run with
// --workers external, until SIGINT or SIGTERM.
func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("worker", stderr)
	// The connection settings are the nats world's (--nats-url, TLS,
	// credentials), parsed and checked the same way.
	kind, err := registry.Lookup(registry.NATS)
	if err != nil {
		return exitFailed, err
	}
	nats := kind.Defaults()
	for _, name := range registry.NATSConnection {
		for _, st := range kind.Settings {
			if st.Name == name {
				help := st.Help
				if name == "url" {
					help = "NATS server or cluster the driver uses (required)"
				}
				fs.Func(kind.FlagName(st), help, func(v string) error { return kind.Set(nats, name, v) })
			}
		}
	}
	concurrency := fs.Int("concurrency", 0, "queue deliveries handled at once (default 64)")
	id := fs.String("id", "", "worker name in records and results (default host-pid)")
	flush := fs.Duration("flush-interval", cluster.DefaultFlushInterval, "how often buffered timeline records are sent to the driver")
	stopTimeout := fs.Duration("stop-timeout", 30*time.Second, "on a signal, how long running handlers may finish")
	status := fs.Duration("status-every", 30*time.Second, "log each open cell's counts this often (0: never)")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return -1, err
	}
	if len(pos) > 0 {
		return -1, usageErr("worker takes no arguments, got %q (flags start with --)", pos[0])
	}
	if nats["url"] == "" {
		return -1, usageErr("worker needs --nats-url (the NATS server or cluster the driver uses)")
	}
	auth := registry.NATSAuth(nats)
	if err := auth.Check(); err != nil {
		return -1, usageErr("nats: %v", err)
	}
	if *concurrency < 0 {
		return -1, usageErr("--concurrency %d: must be >= 1", *concurrency)
	}
	if *flush <= 0 || *stopTimeout <= 0 {
		return -1, usageErr("--flush-interval and --stop-timeout must be > 0")
	}
	// The first SIGINT or SIGTERM stops the worker cleanly; a second one
	// kills it the default way.
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-sctx.Done()
		stop()
	}()
	w, err := cluster.Connect(sctx, cluster.WorkerConfig{URL: nats["url"], Auth: auth, ID: *id,
		Concurrency: *concurrency, FlushInterval: *flush, StopTimeout: *stopTimeout, StatusEvery: *status, Log: stderr})
	if err != nil {
		if errors.Is(err, natsworld.ErrUnreachable) || errors.Is(err, natsworld.ErrAuth) {
			return -1, usageErr("--nats-url: %v", err)
		}
		return exitFailed, err
	}
	if err := w.Run(sctx); err != nil {
		fmt.Fprintln(stderr, "durabench: "+oneLine(err))
		return exitFailed, nil
	}
	fmt.Fprintf(stderr, "durabench worker %s: stopped\n", w.ID())
	return exitOK, nil
}
