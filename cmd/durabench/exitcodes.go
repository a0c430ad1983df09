package main

import (
	"errors"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/profile"
)

// Exit codes: the contract a CI job relies on (the usage text lists them).
// They live here only; the packages report outcomes as errors.
const (
	exitOK          = 0
	exitRegression  = 1 // a gate rule failed (or sim --gate found a violation)
	exitUsage       = 2 // usage or input error
	exitFailed      = 3 // the sweep itself failed
	exitInterrupted = 130
)

// exitCode maps an error to the exit-code contract.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, sweep.ErrInterrupted):
		return exitInterrupted
	case errors.Is(err, sweep.ErrInvalid), errors.Is(err, results.ErrInvalid),
		errors.Is(err, stats.ErrRules), errors.Is(err, profile.ErrInvalid),
		errors.Is(err, scenarios.ErrUnknown), errors.Is(err, scenarios.ErrInvalid):
		return exitUsage
	}
	return exitFailed
}

// gateExitCode maps a gate's result to the exit-code contract: 3 when the
// head sweep failed (a verdict on partial data would mislead), else 2 when a
// rule matched no cell (the configuration is wrong), else 1 when a check
// failed, else 0 (GateReport.Err reports the result in that order of
// precedence).
func gateExitCode(rep *stats.GateReport) int {
	err := rep.Err()
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, results.ErrSweepFailed):
		return exitFailed
	case errors.Is(err, stats.ErrRules):
		return exitUsage
	}
	return exitRegression
}
