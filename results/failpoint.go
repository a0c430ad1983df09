package results

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// FailpointEnv names the environment variable of the crash tests'
// failpoints (cmd/durabench's TestSIGKILLAndResume). It stops the process
// half-way through a write, so the test's SIGKILL lands exactly there:
//
//	journal-append:N   the N-th journal append of the process, after half its line
//	results-write      the results file's write, after half its bytes
//
// The process says "durabench: failpoint <name>" on stderr and waits to be
// killed. Unset (always, outside those tests), it does nothing.
const FailpointEnv = "DURABENCH_FAILPOINT"

var (
	failpoint = os.Getenv(FailpointEnv)
	appends   atomic.Int64
)

// atFailpoint stops the process when name is the armed failpoint: f has
// had half of what was being written, synced to disk.
func atFailpoint(name string, f *os.File) {
	if failpoint == "" {
		return
	}
	point, n, _ := strings.Cut(failpoint, ":")
	if point != name {
		return
	}
	if name == "journal-append" {
		want, _ := strconv.ParseInt(n, 10, 64)
		if appends.Add(1) != want {
			return
		}
	}
	_ = f.Sync()
	fmt.Fprintf(os.Stderr, "durabench: failpoint %s\n", failpoint)
	select {} // until killed
}
