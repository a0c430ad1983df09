package profile

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/durabench/durabench/world"
)

// ErrInvalid is wrapped by every error about a malformed profile: a bad YAML
// file, a bad fault override, an unknown profile name.
var ErrInvalid = errors.New("invalid profile")

// Error is one mistake in a profile file or a fault override. It wraps
// ErrInvalid.
type Error struct {
	// File is the profile file ("" for overrides and profiles built in Go).
	File string
	// Line is the 1-based line in File (0 when unknown).
	Line int
	// Override is the fault override the mistake is in ("" for files).
	Override string
	// Field is the dotted path of the offending field, e.g.
	// "ops.step_created.transient".
	Field string
	// Msg says what is wrong with it.
	Msg string
}

func (e *Error) Error() string {
	var where string
	switch {
	case e.Override != "":
		where = "fault override " + strconv.Quote(e.Override)
	case e.File != "" && e.Line > 0:
		where = e.File + ":" + strconv.Itoa(e.Line)
	case e.File != "":
		where = e.File
	default:
		where = "profile"
	}
	if e.Field != "" {
		return where + ": " + e.Field + ": " + e.Msg
	}
	return where + ": " + e.Msg
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// FaultError is the transient failure the decorator injects. It wraps
// world.ErrTransient, so the engine treats it like a 429 / 5xx / timeout of a
// real backend; errors.As tells an injected fault from a real one.
type FaultError struct {
	// Profile is the name of the profile that injected the fault.
	Profile string
	// Op is the world call that failed.
	Op world.Op
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("%s: %v (injected by profile %s)", e.Op, world.ErrTransient, e.Profile)
}

// Unwrap returns world.ErrTransient.
func (e *FaultError) Unwrap() error { return world.ErrTransient }
