// Command durabench-target-temporal serves Temporal over durabench's target
// protocol (docs/target-protocol.md): Temporal Go SDK workers against an
// in-process Temporal server on SQLite in memory by default, or against a
// real server or cluster with --temporal-address. README.md says how the
// scenarios map onto workflows and activities and how the worker is tuned.
//
//	durabench-target-temporal --addr 127.0.0.1:0 [--temporal-address host:port --namespace NS] [tuning flags]
//	durabench-target-temporal dev-server [--port N] [--namespace NS]
//
// The second form only runs the in-process Temporal server (no adapter):
// it prints the server's host:port as its first stdout line and stops on
// SIGTERM. The tests use it as "a separately started Temporal server".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/durabench/durabench/protocol"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "dev-server" {
		os.Exit(devServerMain(os.Args[2:]))
	}
	protocol.Main("temporal", setup)
}

// setup declares the adapter's flags (see Config and README.md).
func setup(fs *flag.FlagSet) func(ctx context.Context) (protocol.Backend, error) {
	cfg := DefaultConfig()
	fs.StringVar(&cfg.Address, "temporal-address", "", "host:port of a Temporal frontend to use instead of the in-process server")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Temporal namespace (it must exist on an external server)")
	fs.StringVar(&cfg.TaskQueue, "task-queue", "", "task queue of the adapter's worker (default: a fresh random name)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "task queue partitions of the in-process server (Temporal's default, 4, with --stock-server)")
	fs.BoolVar(&cfg.StockServer, "stock-server", false, "run the in-process server with Temporal's default dynamic config (no latency settings; see README.md)")
	fs.IntVar(&cfg.ActivityPollers, "activity-pollers", cfg.ActivityPollers, "activity task pollers of the worker (SDK default 2)")
	fs.IntVar(&cfg.WorkflowPollers, "workflow-pollers", cfg.WorkflowPollers, "workflow task pollers of the worker (SDK default 2)")
	fs.IntVar(&cfg.MaxActivities, "max-activities", cfg.MaxActivities, "activities the worker runs at once (SDK default 1000)")
	fs.IntVar(&cfg.MaxWorkflowTasks, "max-workflow-tasks", cfg.MaxWorkflowTasks, "workflow tasks the worker runs at once (SDK default 1000)")
	fs.IntVar(&cfg.StickyCacheSize, "sticky-cache", cfg.StickyCacheSize, "workflows the worker keeps in its sticky cache (SDK default 10000)")
	fs.BoolVar(&cfg.DisableEager, "no-eager-activities", false, "turn off eager activity dispatch (up to 3 activities handed back with each workflow task completion)")
	fs.IntVar(&cfg.MaxBranches, "max-branches", cfg.MaxBranches, "largest fan-out accepted (declared in /v1/info)")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "longest sequence accepted (declared in /v1/info)")
	fs.BoolVar(&cfg.NoSpans, "no-spans", false, "send no span events (protocol 1.1): read no history at a run's end")
	fs.BoolVar(&cfg.Verbose, "v", false, "log the SDK's info messages to stderr")
	return func(ctx context.Context) (protocol.Backend, error) {
		return NewBackend(cfg), nil
	}
}

// devServerMain runs only the in-process Temporal server until SIGTERM.
func devServerMain(args []string) int {
	fs := flag.NewFlagSet("durabench-target-temporal dev-server", flag.ContinueOnError)
	ns := fs.String("namespace", "default", "namespace to create")
	partitions := fs.Int("partitions", 1, "task queue partitions")
	stock := fs.Bool("stock-server", false, "Temporal's default dynamic config (no latency settings)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dev, err := startDevServer(devServerOptions{Namespace: *ns, Partitions: *partitions, Stock: *stock})
	if err != nil {
		fmt.Fprintf(os.Stderr, "durabench-target-temporal dev-server: %v\n", err)
		return 1
	}
	fmt.Println(dev.hostPort)
	<-ctx.Done()
	if err := dev.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "durabench-target-temporal dev-server: stop: %v\n", err)
		return 1
	}
	return 0
}
