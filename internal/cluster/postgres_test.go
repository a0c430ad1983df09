package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/durabench/durabench/world/nats/natstest"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// TestExternalWorkersPostgres runs distributed sweeps on the postgres
// world: the workers and the driver are separate processes that share one
// PostgreSQL server (the driver's --postgres-url, which each cell names to
// the workers) and meet on a nats-server process.
func TestExternalWorkersPostgres(t *testing.T) {
	srv, err := pgserver.Start(context.Background(), pgserver.Options{})
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err) // CI installs the binaries (.ci/run)
		}
		t.Skipf("skipped: no PostgreSQL server (%v)", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	natsURL := startServer(t, natstest.Spec{Name: "pg-meeting"})
	on := []string{"--world", "postgres", "--postgres-url", srv.URL(), "--nats-url", natsURL}
	t.Run("TwoWorkers", func(t *testing.T) { testTwoWorkersPostgres(t, srv.URL(), natsURL, on) })
	t.Run("KillWorker", func(t *testing.T) { testKillWorkerOn(t, natsURL, on) })
}

// testTwoWorkersPostgres: each cell's runs are consumed only by the two
// workers, which write every event and queue row to the cell's schema on
// the server at pgURL. The cells complete with every step body recorded
// and both workers taking part, and the driver drops each cell's schema at
// its end.
func testTwoWorkersPostgres(t *testing.T, pgURL, natsURL string, on []string) {
	startWorker(t, natsURL, "w1", "--concurrency", "16")
	startWorker(t, natsURL, "w2", "--concurrency", "16")
	const reps = 4
	s := startSweepOn(t, "", on, "--expect-workers", "2", "--branches", fmt.Sprint(branches), "--versions", "resilient,pending-count",
		"--switches", "none", "--reps", fmt.Sprint(reps), "--warmup", "1", "--option", "body=2ms", "--cell-timeout", "60s")
	s.wait(t, 120*time.Second)
	if s.code != 0 {
		t.Fatalf("sweep exit %d; stdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
	}
	t.Logf("stdout:\n%s", s.stdout)
	f := s.results(t)
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	for _, c := range f.Cells {
		if c.World != "postgres" {
			t.Errorf("cell %s: world %q, want postgres", c.Version, c.World)
		}
		checkCell(t, c, reps, "w1", "w2")
		for _, ws := range c.WorkerStats {
			if ws.Steps == 0 || ws.Lost {
				t.Errorf("cell %s: worker %s ran %d step bodies (lost %v): it did not take part", c.Version, ws.Worker, ws.Steps, ws.Lost)
			}
		}
		if c.WorldIncidents != nil {
			t.Errorf("cell %s: world incidents %v (the last: %s)", c.Version, *c.WorldIncidents, c.WorldIncidents.Last)
		}
	}

	// Every cell's schema is gone (the driver owns it; the workers keep
	// theirs open until the cell ends, and never drop it).
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'durabench\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("schemas left on the server: %s", strings.Join(left, ", "))
	}
}
