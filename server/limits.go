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

// maxHeaderBytes bounds a request's head (request line and headers);
// beyond it the answer is a JSON 431. netMaxHeaderBytes, net/http's own
// bound, lies above it so that heads in between reach limitHeader; net/http
// answers a head beyond its bound (plus its 4 KiB of slack) with a
// plain-text 431 before any handler runs.
const (
	maxHeaderBytes    = 64 << 10
	netMaxHeaderBytes = 2 * maxHeaderBytes
)

// limitHeader refuses, with 431, a request whose head is over
// maxHeaderBytes, counted as sent: the request line and each header line
// with its separators.
func (s *Server) limitHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerSize(r) > maxHeaderBytes {
			writeError(w, http.StatusRequestHeaderFieldsTooLarge, &api.Error{Code: api.CodeHeadersTooLarge, Message: "the request headers are over the limit of " + itoa(maxHeaderBytes) + " bytes"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerSize is the length of r's head as sent over HTTP/1.1.
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
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
