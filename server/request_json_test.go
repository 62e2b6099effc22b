package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// badBody is a request body the server must refuse, and the field and
// batch index its error must name.
type badBody struct {
	name, path, body string
	field            string
	index            int // -1: none
}

// wantRefused sends each body and checks the 400 invalid_argument answer
// and the field (and index) it names.
func wantRefused(t *testing.T, e *env, cases []badBody) {
	t.Helper()
	for _, c := range cases {
		r := e.req("POST", c.path, c.body)
		var b struct {
			Error struct {
				Code, Message, Field string
				Index                *int
			}
		}
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %s %q: %d %s; want 400", c.name, c.path, c.body, r.status, r.body)
			continue
		}
		r.decode(t, &b)
		index := -1
		if b.Error.Index != nil {
			index = *b.Error.Index
		}
		if b.Error.Code != "invalid_argument" || b.Error.Field != c.field || index != c.index {
			t.Errorf("%s: error %+v (index %d); want invalid_argument on field %q index %d", c.name, b.Error, index, c.field, c.index)
		}
	}
}

// wantNoJobs checks that queue holds no job at all.
func wantNoJobs(t *testing.T, e *env, queue string) {
	t.Helper()
	res, err := e.store.List(t.Context(), backend.ListParams{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) > 0 {
		t.Fatalf("%d jobs stored in %s from refused bodies; want none: %+v", len(res.Jobs), queue, res.Jobs[0])
	}
}

// TestDecodeRefusesDuplicateAndWrongCaseFields: a field given twice, or
// named in another case than the API's, is a 400 naming it (a decoder that
// folds case or keeps the last duplicate would read another job than a
// client in another language meant); map keys keep their case.
func TestDecodeRefusesDuplicateAndWrongCaseFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantRefused(t, e, []badBody{
		{"duplicate", "/api/v1/jobs", `{"type":"a","queue":"strict","type":"b"}`, "type", -1},
		{"wrong case", "/api/v1/jobs", `{"Type":"a","queue":"strict"}`, "Type", -1},
		{"wrong case in a batch", "/api/v1/jobs", `[{"type":"a","queue":"strict"},{"type":"a","QUEUE":"strict"}]`, "QUEUE", 1},
		{"duplicate in a batch", "/api/v1/jobs", `[{"type":"a","queue":"strict","queue":"strict"}]`, "queue", 0},
		{"duplicate within the payload", "/api/v1/jobs", `{"type":"a","queue":"strict","payload":{"n":1,"n":2}}`, "payload.n", -1},
		{"duplicate metadata key", "/api/v1/jobs", `{"type":"a","queue":"strict","metadata":{"k":"1","k":"2"}}`, "metadata.k", -1},
		{"wrong case in a claim", "/api/v1/claim", `{"Queues":["strict"]}`, "Queues", -1},
		{"duplicate in a claim", "/api/v1/claim", `{"max":1,"max":1000000}`, "max", -1},
		{"nested wrong case", "/api/v1/leases/complete", `{"items":[{"id":"x","Lease_Token":1}]}`, "items.0.Lease_Token", -1},
		{"unknown field", "/api/v1/jobs", `{"type":"a","queue":"strict","colour":"red"}`, "colour", -1},
		{"wrong type", "/api/v1/jobs", `[{"type":"a","queue":"strict"},{"type":"a","queue":"strict","priority":"high"}]`, "priority", 1},
	})
	wantNoJobs(t, e, "strict")
	// Keys of a map are data, not field names: their case stands.
	id := e.enqueue(map[string]any{"type": "a", "queue": "strict-ok", "metadata": map[string]string{"K": "1", "k": "2"}})
	j, err := e.store.Get(t.Context(), backend.GetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if j.Metadata["K"] != "1" || j.Metadata["k"] != "2" {
		t.Fatalf("metadata = %v; want K=1 and k=2", j.Metadata)
	}
}

// TestDecodeRefusesInvalidUTF8: a body with a byte that is not UTF-8, in
// a payload, a text field or a worker's report, is a 400 naming the field,
// and nothing is stored: a raw payload would be served raw and make claim
// answers invalid JSON, and text would be stored altered (U+FFFD).
func TestDecodeRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantRefused(t, e, []badBody{
		{"payload string", "/api/v1/jobs", "{\"type\":\"a\",\"queue\":\"utf\",\"payload\":\"x\xffy\"}", "payload", -1},
		{"payload member name", "/api/v1/jobs", "{\"type\":\"a\",\"queue\":\"utf\",\"payload\":{\"\xc3\":1}}", "payload", -1},
		{"type", "/api/v1/jobs", "{\"type\":\"a\xff\",\"queue\":\"utf\"}", "type", -1},
		{"title", "/api/v1/jobs", "{\"type\":\"a\",\"queue\":\"utf\",\"title\":\"caf\xe9\"}", "title", -1},
		{"tag in a batch", "/api/v1/jobs", "[{\"type\":\"a\",\"queue\":\"utf\"},{\"type\":\"a\",\"queue\":\"utf\",\"tags\":[\"ok\",\"\xed\xa0\x80\"]}]", "tags.1", 1},
		{"unique key", "/api/v1/jobs", "{\"type\":\"a\",\"queue\":\"utf\",\"unique_key\":\"\xf8\"}", "unique_key", -1},
	})
	wantNoJobs(t, e, "utf")

	id := e.enqueue(map[string]any{"type": "a", "queue": "utf-worker"})
	jobs := e.claim("utf-worker", 1)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs; want 1", len(jobs))
	}
	lease := jobs[0].LeaseToken
	one := "/api/v1/jobs/" + id
	wantRefused(t, e, []badBody{
		{"result", one + "/complete", fmt.Sprintf("{\"lease_token\":%d,\"result\":\"\xff\"}", lease), "result", -1},
		{"batch result", "/api/v1/leases/complete", fmt.Sprintf("{\"items\":[{\"id\":%q,\"lease_token\":%d,\"result\":[\"\xff\"]}]}", id, lease), "items.0.result.0", -1},
		{"log line", one + "/log", fmt.Sprintf("{\"lease_token\":%d,\"lines\":[\"\xff\"]}", lease), "lines.0", -1},
		{"progress message", one + "/progress", fmt.Sprintf("{\"lease_token\":%d,\"percent\":5,\"message\":\"\xff\"}", lease), "message", -1},
		{"fail message", one + "/fail", fmt.Sprintf("{\"lease_token\":%d,\"message\":\"\xff\"}", lease), "message", -1},
		{"fail message with NUL", one + "/fail", fmt.Sprintf(`{"lease_token":%d,"message":"\u0000"}`, lease), "message", -1},
		{"batch fail stack with NUL", "/api/v1/leases/fail", fmt.Sprintf(`{"items":[{"id":%q,"lease_token":%d,"stack":"\u0000"}]}`, id, lease), "stack", 0},
		{"report", "/api/v1/leases/report", fmt.Sprintf("{\"items\":[{\"id\":%q,\"lease_token\":%d,\"logs\":[\"\xff\"]}]}", id, lease), "items.0.logs.0", -1},
	})
	j, err := e.store.Get(t.Context(), backend.GetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != backend.StateActive || len(j.Logs) > 0 || j.Progress != nil {
		t.Fatalf("job after refused reports: state %s, logs %q, progress %+v; want active, untouched", j.State, j.Logs, j.Progress)
	}
}
