package server

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// TestJobWireMatchesEncoding: a job written by writeJob and in a jobs
// answer reads back as the encoding of api.FromJob does, for payloads and
// results as JSON and as base64, and Content-Length is the body's length.
func TestJobWireMatchesEncoding(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	jobs := []*backend.Job{
		{ID: "a", Type: "t", Queue: "q", State: backend.StatePending, RunAt: now, CreatedAt: now},
		{ID: "b", Type: "t", Queue: "q", Payload: []byte(`{"x":[1,2,"<"]}`), Result: []byte(`"done"`), Title: "ti", Tags: []string{"x"}, Metadata: map[string]string{"k": "v"}},
		{ID: "c", Type: "t", Queue: "q", Payload: []byte{0, 1, 2, 255}, Result: []byte(`{ "spaced": 1 }`)},
		{ID: "d", Type: "t", Queue: "q", Payload: []byte(`null`), Result: []byte(`"a\"b c"`), Errors: []backend.AttemptError{{Attempt: 1, At: now, Kind: "failed", Message: "m"}}},
	}
	for _, j := range jobs {
		want, err := encodeJSON(api.FromJob(j))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeJob(rec, j)
		sameJSON(t, rec.Body.Bytes(), want)
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
			t.Fatalf("job %s: Content-Length %s for a body of %d bytes", j.ID, cl, rec.Body.Len())
		}
	}
	ans := jobsAnswer{budget: 1 << 20}
	if n, err := ans.add(jobs); n != len(jobs) || err != nil {
		t.Fatalf("add: %d, %v", n, err)
	}
	rec := httptest.NewRecorder()
	ans.write(rec, "cur", true)
	want, _ := encodeJSON(struct {
		Jobs       []*api.Job `json:"jobs"`
		NextCursor string     `json:"next_cursor"`
		Truncated  bool       `json:"truncated"`
	}{api.FromJobs(jobs), "cur", true})
	sameJSON(t, rec.Body.Bytes(), want)
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("jobs answer: Content-Length %s for a body of %d bytes", cl, rec.Body.Len())
	}
	empty := httptest.NewRecorder()
	(&jobsAnswer{}).write(empty, "", false)
	if empty.Body.String() != "{\"jobs\":[]}\n" || empty.Header().Get("Content-Length") != strconv.Itoa(empty.Body.Len()) {
		t.Fatalf("empty answer %q, Content-Length %s", empty.Body, empty.Header().Get("Content-Length"))
	}
}

// sameJSON fails unless got and want hold the same JSON value.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
