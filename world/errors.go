package world

import "errors"

// Typed errors every world maps its failures to. The engine branches on
// these with errors.Is, never on message text. Worlds wrap them with context
// (fmt.Errorf("...: %w", world.ErrNotFound)).
var (
	// ErrNotFound: the run, step or hook does not exist (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrPrecondition: a guarded append found the log moved (HTTP 412).
	ErrPrecondition = errors.New("precondition failed")
	// ErrConflict: the entity is already in a state that forbids the write,
	// e.g. a second completion of a step (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrGone: the run is terminal; nothing more may be written (HTTP 410).
	ErrGone = errors.New("gone")
	// ErrTransient: a retryable backend failure (429, 5xx, timeout).
	ErrTransient = errors.New("transient failure")
	// ErrAbandon is returned by a Handler to leave a delivery unacknowledged,
	// as a crashed consumer would; it is redelivered after the visibility
	// timeout.
	ErrAbandon = errors.New("delivery abandoned")
	// ErrClosed: the world was closed.
	ErrClosed = errors.New("world closed")
)

// IsTransient reports whether err is worth retrying.
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }
