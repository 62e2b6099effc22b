package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// TestLongPollsAreBounded fills the one long-poll slot with an event
// stream: a waiting claim then answers at once, and a second stream is
// refused with 503.
func TestLongPollsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxLongPolls = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("first stream: %d", resp.StatusCode)
	}
	start := time.Now()
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"empty"}, "wait": "30s"})
	if r.status != 200 || time.Since(start) > 10*time.Second {
		t.Fatalf("claim with every slot taken: %d after %s; want an answer at once", r.status, time.Since(start))
	}
	if r := e.req("GET", "/api/v1/events", nil); r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" {
		t.Fatalf("second stream: %d %s; want 503", r.status, r.body)
	}
}

// TestServerRecoversLeases shows the server's own maintenance at work: a
// lease left to expire is recovered without anyone calling for it.
func TestServerRecoversLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // maintenance every 50ms
	id := e.enqueue(map[string]any{"type": "t", "queue": "recover"})
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"recover"}, "lease": "100ms"})
	if r.status != 200 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	var j struct {
		State  string
		Errors []struct{ Kind string }
	}
	waitUntil(t, 10*time.Second, func() bool {
		e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &j)
		return j.State == "pending"
	})
	if len(j.Errors) != 1 || j.Errors[0].Kind != "lease_expired" {
		t.Fatalf("recovered job's errors: %+v; want one lease_expired attempt", j.Errors)
	}
}
