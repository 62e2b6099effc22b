package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/kyuhq/kyu/server/api"
)

// requireToken is the one authentication check: with a token configured,
// a request must carry "Authorization: Bearer <token>". The comparison
// takes the same time whatever the guess (both sides are hashed first, so
// not even the token's length leaks). A dashboard session cookie (see
// dashboard.Sessions) counts as the token: the dashboard's script calls
// the API with it, and the cross-origin and JSON checks keep other sites
// from riding on it.
func (s *Server) requireToken(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r)
		sum := sha256.Sum256([]byte(got))
		if !ok && s.sessions.Valid(r, s.clockNow()) {
			next.ServeHTTP(w, r)
			return
		}
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kyu"`)
			writeError(w, http.StatusUnauthorized, &api.Error{Code: api.CodeUnauthorized, Message: "a valid bearer token is required (Authorization: Bearer <token>)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireTokenFor guards the catch-all: paths under /api/ and /metrics
// need the token even when no route serves them, so their existence does
// not leak.
func (s *Server) requireTokenFor(next http.Handler) http.Handler {
	guarded := s.requireToken(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics" {
			guarded.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}
