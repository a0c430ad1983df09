package driver

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// openTimer returns the coarse sleep of a precise waiter on Linux: a
// timerfd (the kernel's high-resolution timers) read through the
// runtime's network poller, with the read deadline set to the same
// instant. The goroutine parks like any blocked read: its processor runs
// other goroutines at once (the run just handed to a starter first), and
// the wake comes from whichever fires first — the timerfd, which makes
// an idle processor's epoll_wait return on time where the runtime's own
// timers are rounded up to the next millisecond, or the deadline timer,
// which a busy processor runs at its next scheduling point. A GC worker
// on an otherwise idle processor polls the network and yields to the
// woken reader; it does not check timers. ok is false when the timerfd
// cannot be opened or polled: the caller sleeps on time.Sleep.
func openTimer() (sleep func(time.Duration), release func(), ok bool) {
	fd, _, errno := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, nil, false
	}
	f := os.NewFile(fd, "timerfd")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // not pollable
		f.Close()
		return nil, nil, false
	}
	var buf [8]byte
	var spec itimerspec
	arm := func(fd uintptr) { // made once: a closure per sleep would allocate
		_, _, _ = syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	}
	sleep = func(d time.Duration) {
		if d <= 0 {
			return
		}
		until := time.Now().Add(d)
		spec.value = syscall.NsecToTimespec(int64(d))
		_ = rc.Control(arm)
		_ = f.SetReadDeadline(until)
		// A read may return an expiry left from an earlier wait that the
		// deadline ended first: wait again until the time has come.
		for time.Now().Before(until) {
			if _, err := f.Read(buf[:]); err != nil && !errors.Is(err, syscall.EAGAIN) {
				return // the deadline (or a closed file): the time has come
			}
		}
	}
	return sleep, func() { f.Close() }, true
}

// clockMonotonic is CLOCK_MONOTONIC, the clock of the runtime's own
// timers.
const clockMonotonic = 1

// itimerspec is struct itimerspec of timerfd_settime(2).
type itimerspec struct{ interval, value syscall.Timespec }
