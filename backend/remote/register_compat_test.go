package remote_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestRegisterWorkerNoContent: a server that answers a registration with
// 204 and no body (as servers did before the answer carried the worker's
// command) registers the worker, with no command.
func TestRegisterWorkerNoContent(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/api/v1/workers/w1" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ts.Close()
	b := openRemote(t, ts.URL)
	res, err := b.RegisterWorker(t.Context(), backend.RegisterWorkerParams{
		Worker: backend.WorkerInfo{ID: "w1"}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: time.Now(),
	})
	if err != nil || res.Command != "" {
		t.Fatalf("RegisterWorker against a 204 answer = %+v, %v; want no command, no error", res, err)
	}
}
