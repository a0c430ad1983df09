package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// Postgres is the PostgreSQL world's name.
const Postgres = "postgres"

func init() {
	Register(&Kind{
		Name:        Postgres,
		Description: "PostgreSQL: a throwaway server from the system's binaries (default), or a running one with --postgres-url",
		// Measured (sweep's BenchmarkCellHeap, fan-outs of 500 and 2,500
		// branches): 11.8–14.2 KB per branch; the server runs in its own
		// process, so its memory is not counted.
		StepBytes: 20 << 10,
		Settings: []Setting{
			{Name: "url", Aliases: []string{"pg-url"}, Type: String, Record: true, Redact: redact,
				Help: "PostgreSQL server URL, postgres://user:password@host:port/db (default: a throwaway server)"},
			{Name: "fsync", Aliases: []string{"pg-fsync"}, Type: String, Default: "on", Record: true, Parse: onOff,
				Help: "fsync of the throwaway server: on (what a user's server runs) or off (commits do not wait for the disk)"},
			{Name: "keep", Type: Bool, Default: "false",
				Help: "keep each cell's schema on the server at --postgres-url"},
		},
		Check: func(s Values) error {
			if s["fsync"] == "off" && s["url"] != "" {
				return errors.New("postgres-fsync off applies to the throwaway server: a server at --postgres-url keeps its own settings")
			}
			return nil
		},
		Probe: probePostgres,
		New: func(ctx context.Context, c Config) (world.World, error) {
			url := c.Settings["url"]
			if url == "" {
				s, err := localServer(ctx, c.Settings["fsync"] == "off")
				if err != nil {
					return nil, err
				}
				url = s.URL()
			}
			return pgworld.New(ctx, pgworld.Config{Options: c.Options, URL: url, Schema: c.Prefix, Keep: c.Settings.Bool("keep")})
		},
		Kept: func(s Values, prefix string) string {
			if !s.Bool("keep") || s["url"] == "" {
				return ""
			}
			return fmt.Sprintf("PostgreSQL schemas kept (--postgres-keep): %s<cell>, one per cell", prefix)
		},
	})
}

// onOff is the Parse of fsync: on or off (true/false, 1/0 too).
func onOff(s string) (string, error) {
	switch s {
	case "on", "true", "1":
		return "on", nil
	case "off", "false", "0":
		return "off", nil
	}
	return "", fmt.Errorf("%q is not on or off", s)
}

// probePostgres checks before anything runs that a server at the URL
// answers within probeTimeout, or, with no URL, that a throwaway server
// starts (its binaries are installed).
func probePostgres(ctx context.Context, s Values) error {
	if s["url"] == "" {
		if _, err := findPGBinaries(); err != nil {
			return fmt.Errorf("world postgres: %w with --postgres-url", err)
		}
		if _, err := localServer(ctx, s["fsync"] == "off"); err != nil {
			return fmt.Errorf("world postgres: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	w, err := pgworld.New(ctx, pgworld.Config{URL: s["url"], ConnectTimeout: probeTimeout - 500*time.Millisecond})
	if err != nil {
		return fmt.Errorf("postgres-url: %w", err)
	}
	return w.Close()
}

// findPGBinaries finds the server binaries (a variable for the test of
// their absence).
var findPGBinaries = pgserver.FindBinaries

// local holds the throwaway servers of this process, one per fsync
// setting, shared by every cell: each cell gets its own schema on it. A
// server lives until the process exits; pgserver removes it then, however
// the process ends.
var local struct {
	mu      sync.Mutex
	servers map[bool]*pgserver.Server // by NoFsync
}

func localServer(ctx context.Context, noFsync bool) (*pgserver.Server, error) {
	local.mu.Lock()
	defer local.mu.Unlock()
	if s := local.servers[noFsync]; s != nil {
		return s, nil
	}
	s, err := pgserver.Start(ctx, pgserver.Options{NoFsync: noFsync})
	if err != nil {
		return nil, err
	}
	if local.servers == nil {
		local.servers = map[bool]*pgserver.Server{}
	}
	local.servers[noFsync] = s
	return s, nil
}
