package pgworld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/durabench/durabench/world"
)

// ErrUnreachable is returned by New when no PostgreSQL server answers at
// the configured URL within the connect timeout. The error that wraps it
// names the URL (with any password redacted).
var ErrUnreachable = errors.New("PostgreSQL server unreachable")

// ErrConnectionLost is returned by world calls made while the server does
// not answer, and by calls whose connection broke. It wraps
// world.ErrTransient, so the engine treats it as retryable; a driver that
// sees it persist stops the sweep.
var ErrConnectionLost = fmt.Errorf("connection to PostgreSQL lost: %w", world.ErrTransient)

// SQLSTATEs the world's functions raise for the Append and stream rules
// (class DB is not used by PostgreSQL itself). Constraint violations the
// database finds on its own keep their standard codes: 23505
// unique_violation is a conflict (a second run, step or hook token), 23503
// foreign_key_violation a missing run.
const (
	codeNotFound     = "DB404"
	codeConflict     = "DB409"
	codeGone         = "DB410"
	codePrecondition = "DB412"
)

// typedCodes maps SQLSTATEs to the world's typed errors.
var typedCodes = map[string]error{
	codeNotFound:     world.ErrNotFound,
	codeConflict:     world.ErrConflict,
	codeGone:         world.ErrGone,
	codePrecondition: world.ErrPrecondition,
	"23505":          world.ErrConflict,  // unique_violation
	"23503":          world.ErrNotFound,  // foreign_key_violation
	"40001":          world.ErrTransient, // serialization_failure
	"40P01":          world.ErrTransient, // deadlock_detected
	"55P03":          world.ErrTransient, // lock_not_available
	"55006":          world.ErrTransient, // object_in_use
	"57014":          world.ErrTransient, // query_canceled (statement_timeout)
	"57P01":          ErrConnectionLost,  // admin_shutdown
	"57P02":          ErrConnectionLost,  // crash_shutdown
	"57P03":          ErrConnectionLost,  // cannot_connect_now (starting up, shutting down)
}

// typedClasses maps whole SQLSTATE classes.
var typedClasses = map[string]error{
	"08": ErrConnectionLost,  // connection_exception
	"53": world.ErrTransient, // insufficient_resources (too many connections, disk full, out of memory)
	"58": world.ErrTransient, // system_error (I/O)
}

// mapErr converts a pgx or PostgreSQL error into one of the world's typed
// errors, keeping the original in the chain for diagnostics. op names the
// world call for the message; closed reports whether the world itself was
// closed (then a failure is ErrClosed, not a lost server).
func mapErr(op string, err error, closed bool) error {
	if err == nil {
		return nil
	}
	for _, typed := range []error{world.ErrNotFound, world.ErrPrecondition, world.ErrConflict,
		world.ErrGone, world.ErrTransient, world.ErrClosed} {
		if errors.Is(err, typed) {
			return err // typed by us already
		}
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if closed {
		return fmt.Errorf("pgworld: %s: %w", op, world.ErrClosed)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		typed, ok := typedCodes[pe.Code]
		if !ok && len(pe.Code) == 5 {
			typed, ok = typedClasses[pe.Code[:2]]
		}
		if ok {
			return fmt.Errorf("pgworld: %s: %w (%s: %s)", op, typed, pe.Code, pe.Message)
		}
		return fmt.Errorf("pgworld: %s: %w", op, err)
	}
	switch {
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("pgworld: %s: %w (%w)", op, world.ErrTransient, err)
	case lostConnection(err):
		return fmt.Errorf("pgworld: %s: %w (%w)", op, ErrConnectionLost, err)
	}
	return fmt.Errorf("pgworld: %s: %w", op, err)
}

// lostConnection reports whether err says the connection to the server
// broke or could not be made (as opposed to the server refusing a
// statement).
func lostConnection(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		pgconn.SafeToRetry(err):
		return true
	}
	// pgx reports a connection it already found broken as "conn closed".
	return strings.Contains(err.Error(), "conn closed")
}

// isCode reports whether err is a PostgreSQL error with that SQLSTATE.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
