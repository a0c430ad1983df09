//go:build !unix

package engine_test

import "time"

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }

func minorFaults() int64 { return 0 }
