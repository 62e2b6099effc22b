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

// batchOver reports whether the JSON array that body holds has more than
// max items. It counts the commas between the array's items without
// decoding them, so a batch over the limit costs no more than its bytes;
// a body that is not a well-formed array is left to the decoder.
func batchOver(body []byte, max int) bool {
	depth, commas := 0, 0
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
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				if commas++; commas >= max {
					return true
				}
			}
		}
	}
	return false
}
