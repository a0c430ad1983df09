// Command durabench-target-dbos serves DBOS Transact Go
// (github.com/dbos-inc/dbos-transact-golang) on PostgreSQL over durabench's
// target protocol (docs/target-protocol.md).
//
//	durabench-target-dbos --addr 127.0.0.1:0 [--pg-url URL] [--pool N] [--pg-no-fsync]
//
// By default it starts a throwaway PostgreSQL server from the system's
// binaries (package world/postgres/pgserver: a temporary directory on a free
// loopback port, removed on exit); --pg-url uses a running server instead.
// README.md says how the scenarios map onto DBOS and which settings it uses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

func main() { protocol.Main("dbos", setup) }

// setup declares the adapter's flags and returns the backend's builder.
func setup(fs *flag.FlagSet) func(ctx context.Context) (protocol.Backend, error) {
	cfg := Config{Log: os.Stderr, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	fs.StringVar(&cfg.PGURL, "pg-url", "", "PostgreSQL URL of a running server for DBOS's system database (default: start a throwaway server from the system's binaries)")
	fs.IntVar(&cfg.Pool, "pool", DefaultPool, "DBOS system-database connection pool size (pgxpool MaxConns)")
	fs.BoolVar(&cfg.NoFsync, "pg-no-fsync", false, "throwaway server only: fsync, synchronous_commit and full_page_writes off (not what a user's server runs)")
	fs.IntVar(&cfg.MaxBranches, "max-branches", DefaultMaxBranches, "largest fan-out the adapter declares in /v1/info")
	return func(ctx context.Context) (protocol.Backend, error) {
		if cfg.PGURL == "" {
			if _, err := pgserver.FindBinaries(); err != nil {
				if errors.Is(err, pgserver.ErrNotInstalled) {
					return nil, fmt.Errorf("%w (--pg-url URL)", err)
				}
				return nil, err
			}
		}
		return New(cfg), nil
	}
}
