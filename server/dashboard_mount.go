package server

import (
	"net/http"
	"strings"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/server/api"
	"github.com/kyuhq/kyu/server/dashboard"
)

// buildDashboard builds the dashboard the server serves outside /api/,
// and the sessions that let its pages call the API.
func (s *Server) buildDashboard() error {
	if s.cfg.Token != "" {
		s.sessions = dashboard.NewSessions(s.cfg.Token, s.cfg.SessionTTL)
	}
	d, err := dashboard.New(dashboard.Config{
		BasePath: s.cfg.BasePath, ReadOnly: s.cfg.ReadOnly, Version: kyu.Version(),
		Store: s.cfg.Store, Sessions: s.sessions, Now: s.clockNow, Logger: s.log,
	})
	if err != nil {
		return err
	}
	s.dashboard = d
	return nil
}

// isAPIPath reports whether a path (below the base path) belongs to the
// JSON side of the server rather than the dashboard.
func isAPIPath(p string) bool {
	return strings.HasPrefix(p, "/api/") || p == "/api" || p == "/metrics"
}

// underBasePath serves next with Config.BasePath stripped from the path;
// a path outside it answers 404.
func (s *Server) underBasePath(next http.Handler) http.Handler {
	base := s.cfg.BasePath
	if base == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p != base && !strings.HasPrefix(p, base+"/") {
			writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Message: "no such endpoint: " + p + " is outside the base path " + base})
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = strings.TrimPrefix(p, base)
		if u.Path == "" {
			u.Path = "/"
		}
		if u.RawPath != "" {
			u.RawPath = strings.TrimPrefix(u.RawPath, base)
		}
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}
