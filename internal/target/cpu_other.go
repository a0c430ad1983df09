//go:build !linux

package target

import "time"

// ProcessCPU is not read outside Linux.
func ProcessCPU(int) (time.Duration, bool) { return 0, false }

// Steal is not read outside Linux.
func Steal() (time.Duration, bool) { return 0, false }
