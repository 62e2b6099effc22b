// Package server is kyu's HTTP server: the REST API under /api/v1 (the
// producer side, the worker side that backend/remote speaks, the admin
// operations, a live event stream and an OpenAPI 3.1 document), the web
// dashboard (package server/dashboard) at every other path, /metrics for
// Prometheus and the /healthz and /readyz probes, over any
// backend.Backend.
//
// It is embeddable: New builds a Server from a Config, Start listens and
// serves, Ready says when it accepts connections, Shutdown drains it.
// Handler gives the routes alone (the dashboard included), to mount under
// another mux. The server also runs a maintainer of its backend
// (promotion, lease recovery, retention, while the processes sharing the
// store elect it), so workers that reach it over HTTP need nothing else
// and run none. It keeps no state of its own beside the backend, except the
// answers remembered for Idempotency-Key, which live in this process only.
package server
