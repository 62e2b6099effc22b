package api

import (
	"errors"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// Error codes of the API, each with one HTTP status.
const (
	CodeInvalid          = "invalid_argument"   // 400
	CodeUnauthorized     = "unauthorized"       // 401
	CodeNotFound         = "not_found"          // 404
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeDuplicate        = "duplicate"          // 409
	CodeLeaseLost        = "lease_lost"         // 409
	CodeJobActive        = "job_active"         // 409
	CodeWrongState       = "wrong_state"        // 409
	CodeUniqueKeyHeld    = "unique_key_held"    // 409
	// CodeIdempotencyConflict: an Idempotency-Key reused with another body.
	CodeIdempotencyConflict = "idempotency_conflict"   // 409
	CodeTooLarge            = "payload_too_large"      // 413
	CodeUnsupportedMedia    = "unsupported_media_type" // 415
	CodeInternal            = "internal"               // 500
	CodeNotImplemented      = "not_implemented"        // 501
	CodeUnavailable         = "unavailable"            // 503
	CodeClosed              = "backend_closed"         // 503

	// CodeForbidden: a Host the server does not answer to, or a
	// cross-origin state change.
	CodeForbidden = "forbidden" // 403
	// CodeRequestTimeout: the request body did not arrive in time.
	CodeRequestTimeout = "request_timeout" // 408
	// CodeHeadersTooLarge: the request headers are over the limit.
	CodeHeadersTooLarge = "headers_too_large" // 431
)

// Error is the body of every error answer, under the key "error", and the
// error of one batch item. Field (and Index, in a batch) name the bad
// input; ID and State describe the job a conflict is about.
type Error struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Field   string        `json:"field,omitempty"`
	Index   *int          `json:"index,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	ID      string        `json:"id,omitempty"`
	State   backend.State `json:"state,omitempty"`
	Op      string        `json:"op,omitempty"`
}

// ErrorBody wraps an Error as it is sent.
type ErrorBody struct {
	Error Error `json:"error"`
}

// FromError describes a store's error for the wire. Unknown errors become
// CodeInternal with a generic message (the server logs the real one).
func FromError(err error) *Error {
	var verr *backend.ValidationError
	var serr *backend.StateError
	switch {
	case errors.As(err, &verr):
		e := &Error{Code: CodeInvalid, Message: verr.Error(), Field: verr.Field, Reason: verr.Reason}
		if verr.Index >= 0 {
			i := verr.Index
			e.Index = &i
		}
		return e
	case errors.As(err, &serr):
		return &Error{Code: CodeWrongState, Message: serr.Error(), ID: serr.ID, State: serr.State, Op: serr.Op}
	case errors.Is(err, backend.ErrWorkerNotFound):
		return &Error{Code: CodeNotFound, Message: "worker not registered"}
	case errors.Is(err, backend.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: "job not found"}
	case errors.Is(err, backend.ErrLeaseLost):
		return &Error{Code: CodeLeaseLost, Message: "lease lost: the token is not the job's live lease"}
	case errors.Is(err, backend.ErrJobActive):
		return &Error{Code: CodeJobActive, Message: "the job is active"}
	case errors.Is(err, backend.ErrUniqueKeyHeld):
		return &Error{Code: CodeUniqueKeyHeld, Message: err.Error()}
	case errors.Is(err, backend.ErrWrongState):
		return &Error{Code: CodeWrongState, Message: err.Error()}
	case errors.Is(err, backend.ErrNotSupported):
		return &Error{Code: CodeNotImplemented, Message: "not supported by this server's backend"}
	case errors.Is(err, backend.ErrClosed):
		return &Error{Code: CodeClosed, Message: "the server's backend is closed"}
	}
	return &Error{Code: CodeInternal, Message: "internal error"}
}

// Err turns a wire error back into the store's error, so that errors.Is
// and errors.As work across the wire as they do in-process.
func (e *Error) Err() error {
	switch e.Code {
	case CodeInvalid:
		idx := -1
		if e.Index != nil {
			idx = *e.Index
		}
		reason := e.Reason
		if reason == "" {
			reason = e.Message
		}
		field := e.Field
		if field == "" {
			field = "request"
		}
		return &backend.ValidationError{Index: idx, Field: field, Reason: reason}
	case CodeWrongState:
		if e.Op != "" {
			return &backend.StateError{Op: e.Op, ID: e.ID, State: e.State}
		}
		return fmt.Errorf("%w: %s", backend.ErrWrongState, e.Message)
	case CodeNotFound:
		if e.Message == "worker not registered" {
			return backend.ErrWorkerNotFound
		}
		return backend.ErrNotFound
	case CodeLeaseLost:
		return backend.ErrLeaseLost
	case CodeJobActive:
		return backend.ErrJobActive
	case CodeUniqueKeyHeld:
		return fmt.Errorf("%w: %s", backend.ErrUniqueKeyHeld, e.Message)
	case CodeNotImplemented:
		return backend.ErrNotSupported
	case CodeClosed:
		return fmt.Errorf("server: %w", backend.ErrClosed)
	}
	return e
}

// Error makes a wire error an error for codes without a store equivalent.
func (e *Error) Error() string { return fmt.Sprintf("kyu server: %s: %s", e.Code, e.Message) }
