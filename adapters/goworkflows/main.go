// Command durabench-target-goworkflows serves github.com/cschleiden/go-workflows
// (sqlite backend, one in-process worker) over the durabench target protocol
// (docs/target-protocol.md). durabench starts it as
//
//	durabench-target-goworkflows --addr 127.0.0.1:0 [flags]
//
// It prints its URL once it listens; SIGTERM stops the worker, closes the
// database and removes a database file it created. See README.md.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/durabench/durabench/protocol"
)

func main() { protocol.Main("goworkflows", setup) }

// setup declares the adapter's flags.
func setup(fs *flag.FlagSet) func(ctx context.Context) (protocol.Backend, error) {
	cfg := DefaultConfig()
	fs.StringVar(&cfg.SQLite, "sqlite", "", "sqlite database `file` (default: a private in-memory database); a file the adapter creates is removed when it stops")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the --sqlite file the adapter created when it stops")
	fs.BoolVar(&cfg.Monoprocess, "monoprocess", cfg.Monoprocess, "wrap sqlite in go-workflows' monoprocess backend (pollers woken in-process instead of polling every --poll-interval)")
	fs.IntVar(&cfg.WorkflowPollers, "workflow-pollers", cfg.WorkflowPollers, "workflow task pollers")
	fs.IntVar(&cfg.ActivityPollers, "activity-pollers", cfg.ActivityPollers, "activity task pollers")
	fs.IntVar(&cfg.MaxParallelWorkflows, "max-workflow-tasks", 0, "workflow tasks executed at once (0: no bound)")
	fs.IntVar(&cfg.MaxParallelActs, "max-activity-tasks", 0, "activity tasks executed at once (0: no bound)")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "pause after an empty poll, both workers")
	fs.IntVar(&cfg.CacheSize, "cache-size", cfg.CacheSize, "workflow executor cache size (instances kept between tasks without replay)")
	fs.DurationVar(&cfg.CacheTTL, "cache-ttl", cfg.CacheTTL, "how long an idle instance stays in the executor cache (after it, its next task replays its history)")
	fs.Int64Var(&cfg.MaxHistory, "max-history", cfg.MaxHistory, "go-workflows' limit on a workflow's history events")
	fs.IntVar(&cfg.MaxBranches, "max-branches", cfg.MaxBranches, "largest fanout declared in /v1/info")
	fs.IntVar(&cfg.MaxSteps, "max-steps", cfg.MaxSteps, "longest sequential declared in /v1/info")
	verbose := fs.Bool("v", false, "log go-workflows at info level (default: warnings)")
	return func(ctx context.Context) (protocol.Backend, error) {
		if *verbose {
			cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		return New(cfg), nil
	}
}
