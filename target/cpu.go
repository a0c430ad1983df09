package target

import (
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// SelfCPU is this process's user + system CPU time (getrusage, to the
// microsecond).
func SelfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// SetProcs sets how many processors this target's Go runtime runs on
// (GOMAXPROCS), the --procs flag of `durabench target serve` and of every
// adapter built on Main: 0 leaves the runtime's default (every core). On a
// machine a target shares with durabench's driver, 1 leaves the driver a
// core: a runtime with a processor idle wakes a thread for it on every
// hand-off between goroutines, which costs the target CPU and holds the
// driver's pacer (docs/performance.md, § Driver capacity).
func SetProcs(n int) error {
	if n < 0 {
		return fmt.Errorf("--procs %d: processors must be 0 (every core) or more", n)
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	return nil
}
