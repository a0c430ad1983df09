package target

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// ProcessCPU is process pid's user + system CPU time (/proc/PID/stat, in
// the kernel's clock ticks of 10 ms).
func ProcessCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the whole line.
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}
