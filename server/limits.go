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
