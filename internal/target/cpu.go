package target

import (
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
