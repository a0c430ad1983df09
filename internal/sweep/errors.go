package sweep

import (
	"errors"
	"strconv"
)

// ErrInvalid is matched (errors.Is) by every *UsageError: the user's input
// is wrong and nothing ran (exit 2).
var ErrInvalid = errors.New("invalid sweep")

// UsageError is a mistake in what the user asked for — a flag, a sweep
// file, or the plan as a whole — found before anything ran. Its message
// names where the mistake is: the flag and its value, or the file, line and
// field, or the setting.
type UsageError struct {
	// Flag is the flag as typed ("--reps", "-f") and Value its value, when
	// the mistake is in a flag.
	Flag, Value string
	// File and Line locate the mistake in a sweep file; Line is 0 when the
	// mistake is in the file as a whole.
	File string
	Line int
	// Field is the setting: a sweep-file key ("cell_timeout", "nats.url",
	// "scenarios.options.steps") or, for the plan as a whole, what the
	// message is about ("option steps"). Empty when Flag says it.
	Field string
	// Msg says what is wrong; when empty, Err does.
	Msg string
	// Err is the underlying error, if any (errors.Is and errors.As see it).
	Err error
}

func (e *UsageError) Error() string {
	var where string
	switch {
	case e.Flag != "" && e.Value != "":
		where = e.Flag + " " + e.Value + ": "
	case e.Flag != "":
		where = e.Flag + ": "
	case e.File != "" && e.Line > 0:
		where = e.File + ":" + strconv.Itoa(e.Line) + ": "
	case e.File != "":
		where = e.File + ": "
	}
	if e.Field != "" && e.Flag == "" {
		where += e.Field + ": "
	}
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return where + msg
}

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *UsageError) Is(target error) bool { return target == ErrInvalid }

// invalid is a UsageError about the plan as a whole.
func invalid(msg string) error { return &UsageError{Msg: msg} }
