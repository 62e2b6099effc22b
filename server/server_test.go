package server_test

import (
	"net/http"
	"testing"
)

func TestEnqueueClaimCompleteGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "email.send", "queue": "mail", "payload": map[string]any{"to": "a@example.com"}, "title": "welcome"})
	jobs := e.claim("mail", 10)
	if len(jobs) != 1 || jobs[0].ID != id || jobs[0].LeaseToken != 1 || jobs[0].State != "active" {
		t.Fatalf("claim gave %+v; want job %s active with lease token 1", jobs, id)
	}
	if string(jobs[0].Payload) != `{"to":"a@example.com"}` {
		t.Fatalf("payload came back as %s", jobs[0].Payload)
	}
	r := e.req("POST", "/api/v1/jobs/"+id+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken, "result": map[string]any{"sent": true}})
	if r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	r = e.req("GET", "/api/v1/jobs/"+id, nil)
	var job struct {
		State, Title string
		Result       map[string]bool
		Attempt      int
	}
	r.decode(t, &job)
	if r.status != 200 || job.State != "completed" || !job.Result["sent"] || job.Title != "welcome" || job.Attempt != 1 {
		t.Fatalf("job after completion: %d %s", r.status, r.body)
	}
}
