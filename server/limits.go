package server

import (
	"net/http"

	"github.com/kyuhq/kyu/server/api"
)

// limitBody caps every request body at Config.MaxBodyBytes: a declared
// length over it is refused at once with 413, and a body that turns out
// longer fails its read (answered 413 by the handler).
func (s *Server) limitBody(next http.Handler) http.Handler {
	max := s.cfg.MaxBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			writeError(w, http.StatusRequestEntityTooLarge, &api.Error{Code: api.CodeTooLarge, Message: "the request body is over the limit of " + itoa(max) + " bytes"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		next.ServeHTTP(w, r)
	})
}

// batchItems counts the items of the JSON array that body holds, up to
// max+1 (more than max is all a caller needs to know). It counts the
// commas between the array's items without decoding them, so a batch
// over the limit costs no more than its bytes; a body that is not a
// well-formed array is left to the decoder.
func batchItems(body []byte, max int) int {
	depth, items := 0, 0
	inString, escaped := false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			if depth == 1 && items == 0 {
				items = 1
			}
			inString = true
		case '[', '{':
			if depth == 1 && items == 0 {
				items = 1
			}
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				if items++; items > max {
					return items
				}
			}
		default:
			if depth == 1 && items == 0 && c > ' ' {
				items = 1
			}
		}
	}
	return items
}
