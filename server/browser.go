package server

import (
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/kyuhq/kyu/server/api"
)

// This file holds the checks against requests that a web page makes a
// browser send on its behalf: to a server without a token, the browser's
// requests are as good as the user's own.
//
//   - checkHost refuses Host names other than loopback ones and
//     Config.AllowedHosts on a server without a token, so a page cannot
//     reach the server under a name of its own (DNS rebinding).
//   - checkOrigin refuses state changes that the browser marks as coming
//     from another site (Sec-Fetch-Site, or an Origin that is not the
//     Host).
//   - requireJSON makes every state change under /api/ declare
//     Content-Type: application/json, which a page on another site cannot
//     send without a CORS preflight that the server never grants.

// hostCheck reports whether the server checks Host names, and the names
// it takes (lower case, without port).
func (c Config) hostCheck() (bool, map[string]bool) {
	if c.Token != "" {
		return false, nil
	}
	if !isLoopback(addrHost(c.Addr)) && len(c.AllowedHosts) == 0 {
		return false, nil
	}
	names := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	for _, h := range c.AllowedHosts {
		names[hostName(h)] = true
	}
	return true, names
}

// hostName is the lower-case name of a Host value, without port or IPv6
// brackets.
func hostName(h string) string {
	if name, _, err := net.SplitHostPort(h); err == nil {
		h = name
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// checkHost refuses, with 403, a request whose Host is not one the server
// takes (see Config.AllowedHosts).
func (s *Server) checkHost(next http.Handler) http.Handler {
	on, names := s.cfg.hostCheck()
	if !on {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !names[hostName(r.Host)] {
			writeError(w, http.StatusForbidden, &api.Error{Code: api.CodeForbidden,
				Message: "the Host " + quoteHost(r.Host) + " is not served: a server without a token answers only to localhost, 127.0.0.1 and [::1]; add other names with --allowed-hosts"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// quoteHost quotes a Host value for a message, cut to a readable length.
func quoteHost(h string) string {
	const max = 100
	if len(h) > max {
		h = h[:max] + "…"
	}
	return "\"" + strings.ToValidUTF8(h, "?") + "\""
}

// checkOrigin refuses, with 403, a state change (any method but GET, HEAD
// and OPTIONS) that a browser marks as cross-origin.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			writeError(w, http.StatusForbidden, &api.Error{Code: api.CodeForbidden, Message: "cross-origin request refused: " + err.Error()})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// changesState reports whether a request of method may change state: any
// method but GET, HEAD and OPTIONS.
func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// requireJSON refuses, with 415, a state change whose Content-Type is not
// JSON, body or not.
func (s *Server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if changesState(r.Method) && !isJSONType(r.Header.Get("Content-Type")) {
			got := r.Header.Get("Content-Type")
			if got == "" {
				got = "none"
			}
			writeError(w, http.StatusUnsupportedMediaType, &api.Error{Code: api.CodeUnsupportedMedia,
				Message: r.Method + " requests need Content-Type: application/json, with a body or without; got " + got})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isJSONType reports whether a Content-Type value is a JSON media type.
func isJSONType(ct string) bool {
	if ct == "application/json" { // the usual value, without parsing
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || mt == "application/problem+json")
}
