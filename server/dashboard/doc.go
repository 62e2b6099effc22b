// Package dashboard is kyu's web dashboard: an http.Handler that serves
// its pages (overview, jobs, one job, queues, workers, enqueue), its login
// page and its static files, all embedded in the binary. The pages are
// html/template shells; a little plain JavaScript fills them from the
// REST API under /api/v1 and keeps them live with the server's event
// stream, so the dashboard reaches the store only as any API client does.
// The server package mounts it at every path outside /api/.
package dashboard
