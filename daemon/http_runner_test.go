//go:build unix

package daemon_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/daemon"
)

// TestHTTPRunner checks the http runner's outcomes: 2xx with its body as
// the result, 503 with Retry-After retried after that delay, 500 under
// the retry policy, and what the endpoint receives.
func TestHTTPRunner(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/ok":
			got <- r.Header.Get("Content-Type") + " " + r.Header.Get("Kyu-Attempt") + " " + string(b)
			w.Write([]byte(`{ "sent": true }`))
		case "/busy":
			w.Header().Set("Retry-After", "120")
			http.Error(w, "come back later", http.StatusServiceUnavailable)
		case "/broken":
			http.Error(w, "it broke\nstack…", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{
		"ok":       {URL: srv.URL + "/ok"},
		"busy":     {URL: srv.URL + "/busy", Retry: daemon.RetryPolicy{NoRetry: true}},
		"broken":   {URL: srv.URL + "/broken"},
		"broken-0": {URL: srv.URL + "/broken", Retry: daemon.RetryPolicy{NoRetry: true}},
	}})

	id := bd.enqueue("ok", `{"to":"ada"}`, kyu.EnqueueOptions{})
	j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	if string(j.Result) != `{"sent":true}` {
		t.Errorf("result %s; want the compacted body", j.Result)
	}
	if req := <-got; !strings.HasPrefix(req, "application/json 1 {\"id\":\""+id) || !strings.Contains(req, `"payload":{"to":"ada"}`) {
		t.Errorf("request %q; want the job object", req)
	}

	before := time.Now()
	id = bd.enqueue("busy", `{}`, kyu.EnqueueOptions{})
	j = bd.waitJob(id, "retry", func(j *kyu.Job) bool { return j.State == kyu.StateRetry })
	if d := j.RunAt.Sub(before); d < 110*time.Second || d > 130*time.Second {
		t.Errorf("retry in %v; want the Retry-After of 120s (even with retry = false)", d)
	}
	if msg := lastError(j); msg != "HTTP 503 Service Unavailable: come back later" {
		t.Errorf("error %q", msg)
	}

	id = bd.enqueue("broken", `{}`, kyu.EnqueueOptions{})
	j = bd.waitJob(id, "retry", func(j *kyu.Job) bool { return j.State == kyu.StateRetry })
	if msg := lastError(j); msg != "HTTP 500 Internal Server Error: it broke" {
		t.Errorf("error %q", msg)
	}
	id = bd.enqueue("broken-0", `{}`, kyu.EnqueueOptions{})
	bd.waitJob(id, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
}

// TestHTTPRunnerStop checks that a stop's interrupt ends a request in
// progress and hands its job back, its attempt unused.
func TestHTTPRunnerStop(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With its body read, the server notices the client's end.
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	r := bd.start(daemon.Config{ShutdownTimeout: 100 * time.Millisecond, Handlers: map[string]daemon.HandlerConfig{
		"slow": {URL: srv.URL},
	}})
	id := bd.enqueue("slow", `{}`, kyu.EnqueueOptions{})
	<-arrived
	r.d.Stop()
	r.wait(t)
	if j, _ := bd.c.Get(t.Context(), id); j.State != kyu.StatePending || j.Attempt != 0 {
		t.Errorf("job %s at attempt %d; want pending, attempt unused", j.State, j.Attempt)
	}
}
