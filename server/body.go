package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/kyuhq/kyu/server/api"
)

// guardBody puts a read deadline of Config.BodyTimeout on a request's
// body and marks the body's read errors as the client's (see bodyError).
// The deadline is lifted once the body has been read to its end, so that
// a long-poll or a stream that follows is not cut. Where the connection
// takes no deadline (a handler mounted behind a writer that hides it),
// the body is read without one.
func (s *Server) guardBody(next http.Handler) http.Handler {
	timeout := s.cfg.BodyTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		br := &bodyReader{body: r.Body, ctx: r.Context(), gate: s.bodies}
		defer br.leave()
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			br.rc = rc
		}
		r.Body = br
		next.ServeHTTP(w, r)
	})
}

// bodyReader reads a request body under its deadline; see guardBody.
type bodyReader struct {
	body io.ReadCloser
	// rc lifts the read deadline at the body's end; nil when none is set.
	rc *http.ResponseController
	// ctx is the request's; a wait at the gate ends with it.
	ctx context.Context
	// gate admits the body once read, when it is large; read counts its
	// bytes and held what it holds of the gate until leave.
	gate *bodyGate
	read int64
	held int64
}

// Read reads the body, lifts the deadline at its end, waits at the gate
// there when the body is large, and wraps a failed read in a bodyError
// (except the body limit's, which fail answers 413).
func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.read += int64(n)
	switch {
	case err == nil:
	case err == io.EOF:
		if b.rc != nil {
			b.rc.SetReadDeadline(time.Time{})
			b.rc = nil
		}
		if b.held == 0 && b.read > largeBody {
			held, gerr := b.gate.enter(b.ctx, b.read)
			if gerr != nil {
				return n, &bodyError{err: gerr}
			}
			b.held = held
		}
	default:
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			err = &bodyError{err: err}
		}
	}
	return n, err
}

// leave gives back what the body holds of the gate.
func (b *bodyReader) leave() {
	b.gate.leave(b.held)
	b.held = 0
}

// Close closes the body.
func (b *bodyReader) Close() error { return b.body.Close() }

// bodyError is a failed read of a request body: the client's fault (a
// body cut short, broken chunked encoding, a body that stalled past
// Config.BodyTimeout), answered 400 or 408 and logged at debug level,
// never as a server error.
type bodyError struct{ err error }

// Error says what failed.
func (e *bodyError) Error() string { return "read request body: " + e.err.Error() }

// Unwrap gives the read's own error.
func (e *bodyError) Unwrap() error { return e.err }

// timedOut reports whether the body stalled past its deadline.
func (e *bodyError) timedOut() bool {
	var ne net.Error
	return errors.Is(e.err, os.ErrDeadlineExceeded) || errors.As(e.err, &ne) && ne.Timeout()
}

// answer is the error answer to the failed read.
func (e *bodyError) answer() (int, *api.Error) {
	if e.timedOut() {
		return http.StatusRequestTimeout, &api.Error{Code: api.CodeRequestTimeout, Message: "the request body did not arrive in time"}
	}
	return http.StatusBadRequest, &api.Error{Code: api.CodeInvalid, Field: "body", Reason: "unreadable", Message: "body: the request body could not be read: " + e.err.Error()}
}
