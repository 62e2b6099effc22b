package server

import (
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/kyuhq/kyu/server/api"
)

// nowHeader is the test-clock header (see Config.Clock).
const nowHeader = api.NowHeader

// route is one served endpoint: its method and path pattern (in the form
// of http.ServeMux), whether it needs the token, its handler, and what the
// OpenAPI document says of it.
type route struct {
	method  string
	path    string
	auth    bool
	handle  http.HandlerFunc
	summary string
	// body names the request body's schema, "" for none.
	body string
	// ok is the success status and its schema ("" for no body).
	ok       int
	okSchema string
	// stream marks a text/event-stream answer.
	stream bool
	// params lists the query parameters.
	params []string
}

// routeTable lists every endpoint; New builds it, so the table belongs to
// one Server.
func (s *Server) routeTable() []route {
	return []route{
		// Producer side and reads.
		{method: "POST", path: "/api/v1/jobs", auth: true, handle: s.handleEnqueue, summary: "Enqueue one job (an object) or many (an array, atomically)", body: "EnqueueBody", ok: 201, okSchema: "EnqueueAnswer"},
		{method: "GET", path: "/api/v1/jobs", auth: true, handle: s.handleList, summary: "List jobs with filters and a cursor", ok: 200, okSchema: "JobList", params: []string{"state", "queue", "type", "tag", "q", "limit", "cursor", "order"}},
		{method: "GET", path: "/api/v1/jobs/{id}", auth: true, handle: s.handleGet, summary: "Get a job with every field, by its id or its jid", ok: 200, okSchema: "Job"},
		{method: "DELETE", path: "/api/v1/jobs/{id}", auth: true, handle: s.handleDelete, summary: "Delete a job that is not active", ok: 204},
		{method: "GET", path: "/api/v1/jobs/{id}/wait", auth: true, handle: s.handleWait, summary: "Wait until the job is finished, up to timeout; the job either way", ok: 200, okSchema: "Job", params: []string{"timeout"}},
		{method: "POST", path: "/api/v1/jobs/{id}/retry", auth: true, handle: s.handleRetry, summary: "Run a failed or cancelled job again", ok: 200, okSchema: "Job"},
		{method: "POST", path: "/api/v1/jobs/{id}/cancel", auth: true, handle: s.handleCancel, summary: "Cancel a job (an active one at the end of its attempt)", ok: 200, okSchema: "Job"},
		{method: "POST", path: "/api/v1/jobs/import", auth: true, handle: s.handleImport, summary: "Write jobs with their history, idempotent by id (kyu import, kyu copy); per-job outcomes", body: "ImportRequest", ok: 200, okSchema: "ImportAnswer"},
		{method: "POST", path: "/api/v1/jobs/bulk", auth: true, handle: s.handleBulk, summary: "Retry, cancel or delete every job matching a filter, up to a limit; or count them (dry run)", body: "BulkRequest", ok: 200, okSchema: "BulkResult"},
		{method: "POST", path: "/api/v1/jobs/{id}/run", auth: true, handle: s.handleRunNow, summary: "Make a scheduled or retry job pending now", ok: 200, okSchema: "Job"},

		// Worker side, one job.
		{method: "POST", path: "/api/v1/claim", auth: true, handle: s.handleClaim, summary: "Claim jobs, waiting up to wait for one", body: "ClaimRequest", ok: 200, okSchema: "ClaimResponse"},
		{method: "POST", path: "/api/v1/jobs/{id}/heartbeat", auth: true, handle: s.handleOneHeartbeat, summary: "Extend a lease", body: "OneLease", ok: 200, okSchema: "LeaseStatus"},
		{method: "POST", path: "/api/v1/jobs/{id}/complete", auth: true, handle: s.handleOneComplete, summary: "Complete a job under its lease, storing its result", body: "OneLease", ok: 200, okSchema: "ItemResult"},
		{method: "POST", path: "/api/v1/jobs/{id}/fail", auth: true, handle: s.handleOneFail, summary: "End an attempt with an error", body: "OneLease", ok: 200, okSchema: "ItemResult"},
		{method: "POST", path: "/api/v1/jobs/{id}/release", auth: true, handle: s.handleOneRelease, summary: "Hand a job back to pending", body: "OneLease", ok: 200, okSchema: "ItemResult"},
		{method: "POST", path: "/api/v1/jobs/{id}/progress", auth: true, handle: s.handleOneProgress, summary: "Report a job's progress", body: "OneLease", ok: 200, okSchema: "ItemResult"},
		{method: "POST", path: "/api/v1/jobs/{id}/log", auth: true, handle: s.handleOneLog, summary: "Append lines to a job's log", body: "OneLease", ok: 200, okSchema: "ItemResult"},

		// Worker side, many jobs.
		{method: "POST", path: "/api/v1/leases/heartbeat", auth: true, handle: s.handleHeartbeat, summary: "Extend many leases", body: "HeartbeatRequest", ok: 200, okSchema: "HeartbeatResponse"},
		{method: "POST", path: "/api/v1/leases/complete", auth: true, handle: s.handleComplete, summary: "Complete many jobs; per-item results", body: "CompleteRequest", ok: 200, okSchema: "BatchResponse"},
		{method: "POST", path: "/api/v1/leases/fail", auth: true, handle: s.handleFail, summary: "Fail many attempts; per-item results", body: "FailRequest", ok: 200, okSchema: "BatchResponse"},
		{method: "POST", path: "/api/v1/leases/release", auth: true, handle: s.handleRelease, summary: "Release many jobs; per-item results", body: "ReleaseRequest", ok: 200, okSchema: "BatchResponse"},
		{method: "POST", path: "/api/v1/leases/report", auth: true, handle: s.handleReport, summary: "Report progress and logs of many jobs; per-item results", body: "ReportRequest", ok: 200, okSchema: "BatchResponse"},

		// Queues, stats, workers.
		{method: "GET", path: "/api/v1/queues", auth: true, handle: s.handleQueues, summary: "Queues with counts per state and settings", ok: 200, okSchema: "QueueList"},
		{method: "PATCH", path: "/api/v1/queues/{name}", auth: true, handle: s.handleUpdateQueue, summary: "Change a queue's settings (pause, retention)", body: "QueueUpdate", ok: 200, okSchema: "QueueSettings"},
		{method: "POST", path: "/api/v1/queues/{name}/pause", auth: true, handle: s.handlePause, summary: "Pause a queue", ok: 200, okSchema: "QueueSettings"},
		{method: "POST", path: "/api/v1/queues/{name}/resume", auth: true, handle: s.handleResume, summary: "Resume a queue", ok: 200, okSchema: "QueueSettings"},
		{method: "POST", path: "/api/v1/queues/{name}/retry", auth: true, handle: s.handleRetryQueue, summary: "Retry a queue's failed (or cancelled) jobs", ok: 200, okSchema: "Count", params: []string{"state", "limit"}},
		{method: "DELETE", path: "/api/v1/queues/{name}/jobs", auth: true, handle: s.handlePurge, summary: "Delete a queue's jobs in one state", ok: 200, okSchema: "Count", params: []string{"state", "limit"}},
		{method: "GET", path: "/api/v1/stats", auth: true, handle: s.handleStats, summary: "Counts per queue and state, processed and failed per minute", ok: 200, okSchema: "Stats", params: []string{"minutes"}},
		{method: "GET", path: "/api/v1/workers", auth: true, handle: s.handleWorkers, summary: "The worker registry", ok: 200, okSchema: "WorkerList"},
		{method: "PUT", path: "/api/v1/workers/{id}", auth: true, handle: s.handleRegisterWorker, summary: "Register or refresh a worker process; the answer holds the command it is to obey", body: "WorkerRegistration", ok: 200, okSchema: "WorkerRegistered"},
		{method: "DELETE", path: "/api/v1/workers/{id}", auth: true, handle: s.handleDeregisterWorker, summary: "Remove a worker process's entry", ok: 204},
		{method: "POST", path: "/api/v1/workers/{id}/quiet", auth: true, handle: s.handleQuietWorker, summary: "Ask a worker to quiet down: claim nothing more, finish what runs, stay up", ok: 200, okSchema: "Worker"},
		{method: "POST", path: "/api/v1/workers/{id}/stop", auth: true, handle: s.handleStopWorker, summary: "Ask a worker to shut down gracefully", ok: 200, okSchema: "Worker"},
		{method: "GET", path: "/api/v1/periodic", auth: true, handle: s.handlePeriodic, summary: "The periodic schedules that live workers run, one per name", ok: 200, okSchema: "PeriodicList"},

		// Maintenance, streams, documents.
		{method: "POST", path: "/api/v1/maintenance/{step}", auth: true, handle: s.handleMaintenance, summary: "Run one maintenance step: promote, recover or retention", body: "MaintenanceRequest", ok: 200, okSchema: "MaintenanceResult"},
		{method: "GET", path: "/api/v1/events", auth: true, handle: s.handleEvents, summary: "Server-sent events: job changes, queue counts, worker joins and leaves", ok: 200, stream: true},
		{method: "GET", path: "/api/v1/wakeups", auth: true, handle: s.handleWakeups, summary: "Server-sent wake-ups: a job may be claimable in the queues, or a watched job finished", ok: 200, stream: true, params: []string{"queue", "job"}},
		{method: "GET", path: "/api/v1/openapi.json", auth: false, handle: s.handleOpenAPI, summary: "This document", ok: 200, okSchema: "OpenAPI"},
		{method: "GET", path: "/metrics", auth: true, handle: s.handleMetrics, summary: "Prometheus metrics", ok: 200},
		{method: "GET", path: "/healthz", auth: false, handle: s.handleHealth, summary: "Liveness", ok: 200, okSchema: "Health"},
		{method: "GET", path: "/readyz", auth: false, handle: s.handleReady, summary: "Readiness: the backend answers", ok: 200, okSchema: "Health"},
	}
}

// buildHandler puts the routes on a ServeMux behind the common middleware.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes {
		h := http.Handler(rt.handle)
		if s.cfg.ReadOnly && changesState(rt.method) && !workerSide(rt) {
			h = http.HandlerFunc(refuseWrite)
		}
		h = s.instrument(rt.method+" "+rt.path, h)
		if changesState(rt.method) {
			h = s.requireJSON(h)
		}
		if rt.auth {
			h = s.requireToken(h)
		}
		mux.Handle(rt.method+" "+rt.path, h)
	}
	// Everything else: the dashboard, or under /api/ JSON 404 and 405
	// answers instead of the mux's text.
	unmatched := s.requireTokenFor(http.HandlerFunc(s.handleUnmatched))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAPIPath(r.URL.Path) {
			unmatched.ServeHTTP(w, r)
			return
		}
		s.dashboard.ServeHTTP(w, r)
	}))
	h := s.guardBody(mux)
	h = s.limitBody(h)
	h = s.checkOrigin(h)
	h = s.refuseUnclean(h)
	h = s.underBasePath(h)
	h = s.limitHeader(h)
	return s.checkHost(h)
}

// refuseUnclean answers a path that is not in clean form (with "//", "."
// or ".." segments) with a JSON 404 naming its clean form, where the mux
// would redirect with an HTML body. Under /api/ and /metrics it needs the
// token, as every other answer there does.
func (s *Server) refuseUnclean(next http.Handler) http.Handler {
	refuse := s.requireTokenFor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound,
			Message: "no such endpoint: " + r.URL.EscapedPath() + " is not a clean path; its clean form is " + cleanPath(r.URL.EscapedPath())})
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
			refuse.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is p as http.ServeMux matches it: rooted, without "//", "."
// and ".." segments, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// handleUnmatched answers a path that no route serves: 405 when another
// method of that path is served, 404 otherwise.
func (s *Server) handleUnmatched(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, rt := range s.routes {
		if pathMatches(rt.path, r.URL.Path) && rt.method != r.Method {
			allowed = append(allowed, rt.method)
		}
	}
	if len(allowed) > 0 {
		slices.Sort(allowed)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, &api.Error{Code: api.CodeMethodNotAllowed, Message: r.Method + " is not served on " + r.URL.Path})
		return
	}
	writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Message: "no such endpoint: " + r.URL.Path})
}

// pathMatches reports whether path fits pattern, whose {name} segments
// match any one non-empty segment.
func pathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if strings.HasPrefix(ps[i], "{") {
			if xs[i] == "" {
				return false
			}
			continue
		}
		if ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// Routes lists the served endpoints as "METHOD /path" patterns, in the
// form of http.ServeMux, in the order the OpenAPI document was built from.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.method + " " + rt.path
	}
	return out
}
