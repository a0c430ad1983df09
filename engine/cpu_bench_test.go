//go:build unix

package engine_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the test process has used.
// On a shared machine it moves far less than wall time with the load of
// other processes, so it is the steadier figure for before/after
// comparisons of engine changes.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults is how many page faults the test process has taken that
// needed no I/O: a first touch of fresh (or returned) memory. On a VM each
// costs microseconds, counted in processCPU as system time.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Minflt)
}
