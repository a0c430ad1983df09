//go:build !linux

package driver

import "time"

// nanosleep is Linux's (precise_linux.go); elsewhere the driver's coarse
// sleep is time.Sleep.
var nanosleep func(time.Duration)
