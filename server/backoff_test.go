package server_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/server"
)

// failedJob is the part of a job the backoff tests read.
type failedJob struct {
	State   string    `json:"state"`
	Attempt int       `json:"attempt"`
	RunAt   time.Time `json:"run_at"`
}

func TestFailWithoutRetryAtBacksOffByDefault(t *testing.T) {
	t.Parallel()
	// No maintenance: it would promote the job once its retry time came.
	e := newEnv(t, func(c *server.Config) { c.MaintenanceInterval = -1 })
	for _, route := range []string{"one", "batch"} {
		t.Run(route, func(t *testing.T) {
			queue := "backoff-default-" + route
			id := e.enqueue(map[string]any{"type": "t", "queue": queue})
			j := e.claim(queue, 1)[0]
			before := time.Now()
			var r reply
			if route == "one" {
				r = e.req("POST", "/api/v1/jobs/"+id+"/fail", map[string]any{"lease_token": j.LeaseToken, "message": "boom"})
			} else {
				r = e.req("POST", "/api/v1/leases/fail", map[string]any{"items": []map[string]any{{"id": id, "lease_token": j.LeaseToken, "message": "boom"}}})
			}
			after := time.Now()
			if r.status != http.StatusOK {
				t.Fatalf("fail: %d %s", r.status, r.body)
			}
			var got failedJob
			e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &got)
			// The default backoff after attempt 1 is 1s ±20%.
			lo, hi := before.Add(800*time.Millisecond), after.Add(1200*time.Millisecond)
			if got.State != "retry" || got.RunAt.Before(lo) || got.RunAt.After(hi) {
				t.Fatalf("after a fail without retry_at: state %s, run_at %v; want retry with run_at in [%v, %v]", got.State, got.RunAt, lo, hi)
			}
		})
	}
}

func TestFailWithoutRetryAtUsesConfigBackoff(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var attempts []int
	var messages []string
	e := newEnv(t, func(c *server.Config) {
		c.Backoff = func(attempt int, err error) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, attempt)
			messages = append(messages, err.Error())
			return time.Hour
		}
	})
	id := e.enqueue(map[string]any{"type": "t", "queue": "backoff-config"})
	j := e.claim("backoff-config", 1)[0]
	before := time.Now()
	if r := e.req("POST", "/api/v1/jobs/"+id+"/fail", map[string]any{"lease_token": j.LeaseToken, "message": "boom"}); r.status != http.StatusOK {
		t.Fatalf("fail: %d %s", r.status, r.body)
	}
	var got failedJob
	e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &got)
	if got.State != "retry" || got.RunAt.Before(before.Add(time.Hour)) {
		t.Fatalf("state %s, run_at %v; want retry an hour on", got.State, got.RunAt)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 1 || attempts[0] != 1 || messages[0] != "boom" {
		t.Fatalf("Backoff called with attempts %v, messages %q; want once with 1, boom", attempts, messages)
	}
}

func TestFailWithoutRetryAtFixedBackoffZeroRetriesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.Backoff = kyu.FixedBackoff(0) })
	id := e.enqueue(map[string]any{"type": "t", "queue": "backoff-zero"})
	j := e.claim("backoff-zero", 1)[0]
	if r := e.req("POST", "/api/v1/jobs/"+id+"/fail", map[string]any{"lease_token": j.LeaseToken, "message": "boom"}); r.status != http.StatusOK {
		t.Fatalf("fail: %d %s", r.status, r.body)
	}
	var got failedJob
	e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &got)
	if got.State != "pending" {
		t.Fatalf("state %s; want pending", got.State)
	}
}

func TestFailWithStringLeaseTokenNamesTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "t", "queue": "token-type"})
	for path, body := range map[string]any{
		"/api/v1/jobs/" + id + "/fail": map[string]any{"lease_token": "abc"},
		"/api/v1/leases/fail":          map[string]any{"items": []map[string]any{{"id": id, "lease_token": "abc"}}},
	} {
		r := e.req("POST", path, body)
		var got struct{ Error struct{ Message string } }
		r.decode(t, &got)
		want := "lease_token: want an integer, not a string"
		if path == "/api/v1/leases/fail" {
			want = "items.0." + want
		}
		if r.status != http.StatusBadRequest || got.Error.Message != want {
			t.Errorf("POST %s: %d %q; want 400 %q", path, r.status, got.Error.Message, want)
		}
	}
}
