package kyu

import (
	"errors"
	"strings"

	"github.com/kyuhq/kyu/backend"
)

// opError is a store error with the operation and job it came from.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }

// jobError names the operation on a job (action, as "get job X") of a
// store error once: a
// *backend.StateError already names both and is returned as it is, and
// the store's own "kyu: " prefix is not repeated ("kyu: get job X: job
// not found").
func jobError(action string, err error) error {
	var se *backend.StateError
	if errors.As(err, &se) {
		return err
	}
	return &opError{msg: "kyu: " + action + ": " + strings.TrimPrefix(err.Error(), "kyu: "), err: err}
}
