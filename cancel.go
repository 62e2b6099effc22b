package kyu

import (
	"context"
	"errors"

	"github.com/kyuhq/kyu/backend"
)

// Cancel cancels a job and returns it as it is afterwards. A scheduled,
// pending or retry job is cancelled at once (CancelReason "requested"). For
// an active job the request is recorded (CancelRequested): the worker
// running it learns of it at its next heartbeat and cancels the handler's
// context with the cause ErrCancelled, and the job ends cancelled whatever
// the handler then returns, success included. Cancelling a job already
// asked to cancel changes nothing; a finished job gives an error matching
// ErrWrongState, an unknown id one matching ErrNotFound.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	r, err := c.b.Cancel(ctx, backend.CancelParams{ID: id, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, jobError("cancel job "+id, err)
	}
	return jobFromRecord(r), nil
}

// cancelError marks an error that ends its job cancelled.
type cancelError struct{ err error }

// Error is the wrapped error's own message: it is what the job records.
func (e *cancelError) Error() string { return e.err.Error() }
func (e *cancelError) Unwrap() error { return e.err }

// Cancel wraps err so that a handler returning it ends its job cancelled
// (CancelReason "handler"), neither retried nor failed: the work is no
// longer wanted. err's message is recorded as the attempt's error; a nil
// err records "cancelled by handler". errors.Is and errors.As see through
// the wrapper. Not to be confused with Client.Cancel, which asks from
// outside.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by handler")
	}
	return &cancelError{err: err}
}

// isCancel reports whether err was wrapped by Cancel.
func isCancel(err error) bool {
	var c *cancelError
	return errors.As(err, &c)
}
