package target

import (
	"runtime"
	"strings"
	"testing"

	"github.com/durabench/durabench/protocol"
)

// TestSetProcs: --procs N runs the target's Go runtime on N processors, 0
// leaves every core, and a negative count is an error naming the flag.
func TestSetProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	if err := protocol.SetProcs(0); err != nil || runtime.GOMAXPROCS(0) != before {
		t.Fatalf("--procs 0: %v, GOMAXPROCS %d; want the default %d", err, runtime.GOMAXPROCS(0), before)
	}
	if err := protocol.SetProcs(1); err != nil || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("--procs 1: %v, GOMAXPROCS %d", err, runtime.GOMAXPROCS(0))
	}
	err := protocol.SetProcs(-1)
	if err == nil || !strings.Contains(err.Error(), "--procs -1") {
		t.Fatalf("--procs -1: %v; want an error naming --procs", err)
	}
	if runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("a refused --procs changed GOMAXPROCS to %d", runtime.GOMAXPROCS(0))
	}
}
