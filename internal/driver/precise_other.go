//go:build !linux

package driver

import "time"

// openTimer is Linux's (precise_linux.go); elsewhere the driver's coarse
// sleep is time.Sleep.
func openTimer() (sleep func(time.Duration), release func(), ok bool) { return nil, nil, false }
