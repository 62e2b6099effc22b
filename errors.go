package kyu

import (
	"errors"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Errors a caller may test for with errors.Is.
var (
	ErrNotFound  = backend.ErrNotFound
	ErrLeaseLost = backend.ErrLeaseLost
	ErrJobActive = backend.ErrJobActive
	// ErrWrongState: the job's state does not allow the operation (Cancel
	// of a finished job, Retry of a pending one…); a *StateError says which.
	ErrWrongState = backend.ErrWrongState
	// ErrUniqueKeyHeld: Retry would take a unique key another job holds.
	// (An enqueue whose key is held is not an error: its EnqueueResult
	// has Duplicate set.)
	ErrUniqueKeyHeld = backend.ErrUniqueKeyHeld
	// ErrNotSupported: the backend does not offer the operation (such as
	// EnqueueTx), or not with the arguments given (a transaction of a type
	// it cannot use).
	ErrNotSupported = backend.ErrNotSupported
	// ErrCancelled is the cause (context.Cause) of a handler's context
	// ended because someone cancelled its job with Client.Cancel.
	ErrCancelled = errors.New("kyu: job cancelled")
	// ErrNotInHandler: Progress, Log or Logf was called with a context that
	// is not a running handler's, or SetResult on a Job no handler runs.
	ErrNotInHandler = errors.New("kyu: not inside a running handler")
)

// StateError refuses an operation on a job in the wrong state; it matches
// ErrWrongState.
type StateError = backend.StateError

// ValidationError is bad input to Enqueue, naming the field; nothing was
// written. Client returns it as it is, not wrapped.
type ValidationError = backend.ValidationError

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

// Error is the wrapped error's own message: it is what the job records.
func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the job fails at once, skipping remaining attempts.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for the next attempt after a given delay.
type retryAfterError struct {
	delay time.Duration
	err   error
}

// Error is the wrapped error's own message: it is what the job records.
func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter fails this attempt and schedules the next one after d,
// overriding the backoff. It still counts as an attempt.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{delay: d, err: err}
}

// retryDelay returns the delay requested by RetryAfter, if any.
func retryDelay(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.delay, true
	}
	return 0, false
}
