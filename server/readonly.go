package server

import (
	"net/http"
	"strings"

	"github.com/kyuhq/kyu/server/api"
)

// workerSide reports whether a route is one that workers call to run
// jobs (claims, leases, progress, logs, the worker registry, maintenance
// steps): a read-only server still serves these. Commands to workers
// (quiet, stop) are not among them.
func workerSide(rt route) bool {
	switch {
	case strings.HasSuffix(rt.path, "/{id}/quiet"), strings.HasSuffix(rt.path, "/{id}/stop"):
		return false
	case rt.path == "/api/v1/claim",
		strings.HasPrefix(rt.path, "/api/v1/leases/"),
		strings.HasPrefix(rt.path, "/api/v1/workers/"),
		strings.HasPrefix(rt.path, "/api/v1/maintenance/"):
		return true
	case strings.HasPrefix(rt.path, "/api/v1/jobs/{id}/"):
		switch rt.path[len("/api/v1/jobs/{id}/"):] {
		case "heartbeat", "complete", "fail", "release", "progress", "log":
			return true
		}
	}
	return false
}

// refuseWrite answers 403 to a state change on a read-only server.
func refuseWrite(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusForbidden, &api.Error{Code: api.CodeForbidden, Message: "this server is read-only: only workers' calls may change state"})
}
