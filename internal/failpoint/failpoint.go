// Package failpoint stops the process at a named point of a write, so a
// crash test's SIGKILL lands exactly there. It imports nothing of
// durabench: the results file, its journal and the NATS world's stores
// call it alike.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Env names the environment variable of the crash tests'
// failpoints (cmd/durabench's TestSIGKILLAndResume). It stops the process
// half-way through a write, so the test's SIGKILL lands exactly there:
//
//	journal-append:N     the N-th journal append of the process, after half its line
//	results-write        the results file's write, after half its bytes
//	nats-store-birth:N   the N-th embedded NATS store the process makes, its
//	                     directory made and not yet locked (world/nats)
//
// The process says "durabench: failpoint <name>" on stderr and waits to be
// killed. Unset (always, outside those tests), it does nothing.
const Env = "DURABENCH_FAILPOINT"

// Armed reports whether a failpoint is armed in this process (a writer
// then splits its write in two around At).
func Armed() bool { return failpoint != "" }

var (
	failpoint = os.Getenv(Env)
	// reached counts the armed failpoint's calls (only one is armed).
	reached atomic.Int64
)

// At stops the process when name is the armed failpoint (its
// N-th call, for a failpoint armed as name:N): f, when not nil, has had
// half of what was being written, and is synced to disk first.
func At(name string, f *os.File) {
	if failpoint == "" {
		return
	}
	point, n, _ := strings.Cut(failpoint, ":")
	if point != name {
		return
	}
	if n != "" {
		want, _ := strconv.ParseInt(n, 10, 64)
		if reached.Add(1) != want {
			return
		}
	}
	if f != nil {
		_ = f.Sync()
	}
	fmt.Fprintf(os.Stderr, "durabench: failpoint %s\n", failpoint)
	select {} // until killed
}
