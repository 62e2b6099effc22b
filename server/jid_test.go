package server_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestJID checks the jid over the API: enqueue carries it, the job shows
// it, GET /api/v1/jobs/{id} finds a job by it, and a held jid is a
// duplicate naming its holder.
func TestJID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "t", "queue": "jid", "jid": "fk-123"})
	type job struct{ ID, JID string }
	for _, path := range []string{id, "fk-123", "fk-123?by=jid"} {
		r := e.req("GET", "/api/v1/jobs/"+path, nil)
		var got job
		r.decode(t, &got)
		if r.status != http.StatusOK || got.ID != id || got.JID != "fk-123" {
			t.Fatalf("GET /api/v1/jobs/%s: %d %s; want job %s with jid fk-123", path, r.status, r.body, id)
		}
	}

	r := e.req("POST", "/api/v1/jobs", map[string]any{"type": "other", "queue": "elsewhere", "jid": "fk-123"})
	var dup struct {
		Error struct{ Code, ID, Field string }
	}
	r.decode(t, &dup)
	if r.status != http.StatusConflict || dup.Error.Code != "duplicate" || dup.Error.ID != id || dup.Error.Field != "jid" {
		t.Fatalf("enqueue with a held jid: %d %s; want 409 duplicate on jid naming %s", r.status, r.body, id)
	}
	r = e.req("POST", "/api/v1/jobs", map[string]any{"type": "t", "jid": "fk-123", "unique_key": "free"})
	if r.decode(t, &dup); r.status != http.StatusConflict || dup.Error.Field != "jid" {
		t.Fatalf("enqueue with a held jid and a free unique key: %d %s; want 409 on jid", r.status, r.body)
	}
	e.enqueue(map[string]any{"type": "t", "unique_key": "held"})
	r = e.req("POST", "/api/v1/jobs", map[string]any{"type": "t", "jid": "free", "unique_key": "held"})
	if r.decode(t, &dup); r.status != http.StatusConflict || dup.Error.Field != "unique_key" {
		t.Fatalf("enqueue with a free jid and a held unique key: %d %s; want 409 on unique_key", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/jobs", []map[string]any{{"type": "t", "jid": "b"}, {"type": "t", "jid": "b"}})
	var batch []struct {
		ID        string
		Duplicate bool
	}
	r.decode(t, &batch)
	if r.status != http.StatusCreated || len(batch) != 2 || batch[0].Duplicate || !batch[1].Duplicate || batch[1].ID != batch[0].ID {
		t.Fatalf("batch with one jid twice: %d %s; want the second a duplicate of the first", r.status, r.body)
	}

	// A jid shaped like a kyu id: the id wins, ?by=jid finds the jid.
	other := e.enqueue(map[string]any{"type": "t", "jid": id})
	var got job
	if e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &got); got.ID != id {
		t.Fatalf("GET of an id that is also a jid answered job %s; want the job with the id, %s", got.ID, id)
	}
	if e.req("GET", "/api/v1/jobs/"+id+"?by=jid", nil).decode(t, &got); got.ID != other {
		t.Fatalf("GET by=jid answered job %s; want %s, whose jid it is", got.ID, other)
	}
	for path, want := range map[string]int{
		"fk-123?by=id":                        http.StatusNotFound,
		url.PathEscape("no such"):             http.StatusNotFound,
		other + "?by=jid":                     http.StatusNotFound,
		"fk-123?by=name":                      http.StatusBadRequest,
		url.PathEscape("no such") + "?by=jid": http.StatusNotFound,
	} {
		if r := e.req("GET", "/api/v1/jobs/"+path, nil); r.status != want {
			t.Errorf("GET /api/v1/jobs/%s: %d %s; want %d", path, r.status, r.body, want)
		}
	}
}
