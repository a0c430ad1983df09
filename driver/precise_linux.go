package driver

import (
	"syscall"
	"time"
)

// nanosleep sleeps d in the nanosleep system call: the kernel's
// high-resolution timers, not the Go scheduler's millisecond poll timeout.
// The goroutine's thread blocks for d (the runtime hands its processor to
// other goroutines if the sleep lasts); a signal (the runtime's preemption)
// resumes the sleep with what is left. The thread's timer slack (by default
// 50 µs added to every sleep so the kernel can batch wake-ups) is set to
// 1 ns first: it is per thread, and the goroutine may be on any of the
// runtime's threads. Other goroutines' timed waits on those threads become
// as precise, which costs nothing measurable.
var nanosleep = func(d time.Duration) {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// prSetTimerSlack is PR_SET_TIMERSLACK of prctl(2).
const prSetTimerSlack = 29
