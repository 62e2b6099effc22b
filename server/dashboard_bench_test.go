package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
)

// dashboardBenchEnv sizes the fixture of BenchmarkDashboardPage: "N,M"
// means N completed and M pending jobs (the figure is
// "1000000,100000"). Without it the fixture is 2000 completed and 200
// pending, so that .ci/run's single pass stays quick.
const dashboardBenchEnv = "KYU_DASHBOARD_BENCH_JOBS"

// dashboardPages lists each page with the requests it costs the server:
// its HTML shell, then the API calls its script makes on load ({id} is a
// job's id).
var dashboardPages = []struct {
	name  string
	paths []string
}{
	{"overview", []string{"/", "/api/v1/queues", "/api/v1/workers", "/api/v1/stats?minutes=60"}},
	{"jobs", []string{"/jobs", "/api/v1/queues", "/api/v1/jobs?limit=50&order=newest"}},
	{"jobs-failed", []string{"/jobs?state=failed", "/api/v1/queues", "/api/v1/jobs?state=failed&limit=50&order=newest"}},
	{"jobs-search", []string{"/jobs?q=job+99", "/api/v1/queues", "/api/v1/jobs?q=job+99&limit=50&order=newest"}},
	{"jobs-search-none", []string{"/jobs?q=nothing+matches", "/api/v1/queues", "/api/v1/jobs?q=nothing+matches&limit=50&order=newest"}},
	{"jobs-queue-type", []string{"/jobs?queue=images&type=bench.page", "/api/v1/queues", "/api/v1/jobs?queue=images&type=bench.page&limit=50&order=oldest"}},
	{"job", []string{"/jobs/{id}", "/api/v1/jobs/{id}"}},
	{"queues", []string{"/queues", "/api/v1/queues", "/api/v1/workers"}},
	{"workers", []string{"/workers", "/api/v1/workers"}},
	{"periodic", []string{"/periodic", "/api/v1/periodic"}},
}

// BenchmarkDashboardPage measures each dashboard page's server time: its
// shell and the API calls its script makes on load, served in turn
// through the server's handler over an embedded store holding the
// fixture (see dashboardBenchEnv).
func BenchmarkDashboardPage(b *testing.B) {
	completed, pending := 2000, 200
	if v := os.Getenv(dashboardBenchEnv); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d", &completed, &pending); err != nil {
			b.Fatalf("%s=%q: want N,M (completed, pending)", dashboardBenchEnv, v)
		}
	}
	store := openStoreTB(b)
	id := fillDashboardStore(b, store, completed, pending)
	srv, err := server.New(server.Config{Backend: store, MaintenanceInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	for _, p := range dashboardPages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				for _, path := range p.paths {
					if path == "/jobs/{id}" || path == "/api/v1/jobs/{id}" {
						path = path[:len(path)-len("{id}")] + id
					}
					req := httptest.NewRequest("GET", path, nil)
					req.Host = "127.0.0.1"
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("GET %s = %d %.200s", path, rec.Code, rec.Body.String())
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// fillDashboardStore enqueues completed jobs (claimed and completed in
// batches) and pending ones over three queues, and returns the id of the
// last completed job.
func fillDashboardStore(b *testing.B, store backend.Backend, completed, pending int) string {
	b.Helper()
	ctx := b.Context()
	now := time.Now()
	const batch = 1000
	queues := []string{"emails", "images", "reports"}
	enqueue := func(n int) {
		for done := 0; done < n; {
			k := min(batch, n-done)
			jobs := make([]backend.NewJob, k)
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "bench.page", Queue: queues[(done+i)%len(queues)], Payload: []byte(`{"n":` + strconv.Itoa(done+i) + `}`), Title: "job " + strconv.Itoa(done+i)}
			}
			if _, err := store.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now}); err != nil {
				b.Fatal(err)
			}
			done += k
		}
	}
	enqueue(completed)
	last := ""
	for done := 0; done < completed; {
		res, err := store.Claim(ctx, backend.ClaimParams{Queues: queues, Mode: backend.ClaimWeighted, Max: batch, Lease: time.Hour, WorkerID: "bench", Now: now})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Jobs) == 0 {
			b.Fatalf("claimed nothing after %d of %d", done, completed)
		}
		items := make([]backend.CompleteItem, len(res.Jobs))
		for i, j := range res.Jobs {
			items[i] = backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}
			last = j.ID
		}
		if _, err := store.Complete(ctx, backend.CompleteParams{Items: items, Now: now}); err != nil {
			b.Fatal(err)
		}
		done += len(res.Jobs)
	}
	enqueue(pending)
	return last
}
