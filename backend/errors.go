package backend

import (
	"errors"
	"fmt"
)

// Errors every backend returns, so callers can test with errors.Is.
var (
	// ErrNotFound: no job has the given id.
	ErrNotFound = errors.New("kyu: job not found")
	// ErrLeaseLost: the lease token presented is not the job's current live
	// lease (it expired, was released, or another claim holds the job).
	// Nothing was changed.
	ErrLeaseLost = errors.New("kyu: lease lost")
	// ErrJobActive: the operation is refused while the job is active.
	ErrJobActive = errors.New("kyu: job is active")
	// ErrNotSupported: this backend does not offer the operation.
	ErrNotSupported = errors.New("kyu: not supported by this backend")
	// ErrClosed: the backend has been closed.
	ErrClosed = errors.New("kyu: backend closed")
	// ErrWrongState: the job's state does not allow the operation (a
	// *StateError says which).
	ErrWrongState = errors.New("kyu: job is in the wrong state for this")
	// ErrUniqueKeyHeld: Retry would take a unique key another job holds.
	ErrUniqueKeyHeld = errors.New("kyu: unique key is held by another job")
)

// StateError refuses an operation on a job in the wrong state. It matches
// ErrWrongState.
type StateError struct {
	Op    string // "cancel", "retry", "run now"
	ID    string
	State State
}

func (e *StateError) Error() string {
	if e.Op == "run now" {
		return fmt.Sprintf("kyu: cannot run job %s now: it is %s", e.ID, e.State)
	}
	return fmt.Sprintf("kyu: cannot %s job %s: it is %s", e.Op, e.ID, e.State)
}

// Unwrap makes a StateError match ErrWrongState.
func (e *StateError) Unwrap() error { return ErrWrongState }

// ValidationError is bad input: it names the field and, in a batch, the
// index of the item. Nothing was written.
type ValidationError struct {
	Index  int // position in a batch; -1 when not in a batch
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("kyu: invalid job %d: %s: %s", e.Index, e.Field, e.Reason)
	}
	return fmt.Sprintf("kyu: invalid %s: %s", e.Field, e.Reason)
}

// invalid builds a ValidationError outside a batch.
func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Index: -1, Field: field, Reason: fmt.Sprintf(format, args...)}
}
