package pgworld_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/durabench/durabench/world/postgres/pgserver"
)

// The tests run against one throwaway server the package starts (or the
// server DURABENCH_POSTGRES_URL names); each world gets its own schema.
var (
	serverURL string
	server    *pgserver.Server
	noServer  string // why there is none: the tests skip with it
)

func TestMain(m *testing.M) {
	serverURL = os.Getenv("DURABENCH_POSTGRES_URL")
	if serverURL == "" {
		s, err := pgserver.Start(context.Background(), pgserver.Options{})
		switch {
		case err == nil:
			server, serverURL = s, s.URL()
		case os.Getenv("CI") != "":
			// CI installs the binaries (.ci/run): their absence is a failure there.
			fmt.Fprintln(os.Stderr, "pgworld tests: no PostgreSQL server:", err)
			os.Exit(1)
		default:
			noServer = err.Error()
		}
	}
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	os.Exit(code)
}

// needServer skips the test when no server could be started.
func needServer(t testing.TB) string {
	t.Helper()
	if serverURL == "" {
		t.Skipf("skipped: no PostgreSQL server (%s)", noServer)
	}
	return serverURL
}
