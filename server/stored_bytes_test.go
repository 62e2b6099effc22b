package server_test

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/kyuhq/kyu/backend"
)

// TestStoredBytesNotUTF8TravelAsBase64: a payload and a result that look
// like JSON but hold a byte that is not UTF-8 (the Go API stores any
// bytes) are served as payload_b64 and result_b64, so the answers that
// carry them are valid UTF-8 JSON and decode in a strict decoder, other
// jobs of the same claim answer included.
func TestStoredBytesNotUTF8TravelAsBase64(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const queue = "utf-stored"
	bad := []byte("{\"s\":\"x\xffy\"}")
	res, err := e.store.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{
		{Type: "a", Queue: queue, Payload: bad},
		{Type: "a", Queue: queue, Payload: []byte(`{"s":"ok"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	badID := res.Jobs[0].ID

	type job struct {
		ID         string          `json:"id"`
		LeaseToken int64           `json:"lease_token"`
		Payload    json.RawMessage `json:"payload"`
		PayloadB64 []byte          `json:"payload_b64"`
		Result     json.RawMessage `json:"result"`
		ResultB64  []byte          `json:"result_b64"`
	}
	// strict decodes an answer as a strict decoder in another language
	// would: invalid UTF-8 anywhere is an error.
	strict := func(what string, raw []byte, v any) {
		t.Helper()
		if !utf8.Valid(raw) {
			t.Fatalf("%s: the answer is not valid UTF-8: %q", what, raw)
		}
		if err := jsonv2.Unmarshal(raw, v, jsonv2.RejectUnknownMembers(false)); err != nil {
			t.Fatalf("%s: %v\n%q", what, err, raw)
		}
	}
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{queue}, "max": 2})
	var claim struct {
		Jobs []job `json:"jobs"`
	}
	strict("claim", r.body, &claim)
	if len(claim.Jobs) != 2 {
		t.Fatalf("claimed %d jobs; want 2: %s", len(claim.Jobs), r.body)
	}
	var lease int64
	for _, j := range claim.Jobs {
		if j.ID == badID {
			lease = j.LeaseToken
			if string(j.PayloadB64) != string(bad) || j.Payload != nil {
				t.Fatalf("claimed payload %q, payload_b64 %q; want payload_b64 %q", j.Payload, j.PayloadB64, bad)
			}
		} else if string(j.Payload) != `{"s":"ok"}` {
			t.Fatalf("the other job's payload = %q; want it as JSON", j.Payload)
		}
	}
	cres, err := e.store.Complete(t.Context(), backend.CompleteParams{Now: time.Now(), Items: []backend.CompleteItem{
		{Lease: backend.Lease{JobID: badID, Token: lease}, Result: bad},
	}})
	if err != nil || cres.Errors[0] != nil {
		t.Fatalf("Complete: %v %v", err, cres.Errors)
	}
	var got job
	strict("get", e.req("GET", "/api/v1/jobs/"+badID, nil).body, &got)
	if string(got.PayloadB64) != string(bad) || string(got.ResultB64) != string(bad) || got.Payload != nil || got.Result != nil {
		t.Fatalf("get: payload %q / %q, result %q / %q; want both as base64 %q", got.Payload, got.PayloadB64, got.Result, got.ResultB64, bad)
	}
	var list struct {
		Jobs []job `json:"jobs"`
	}
	strict("list", e.req("GET", "/api/v1/jobs?queue="+queue, nil).body, &list)
	if len(list.Jobs) != 2 {
		t.Fatalf("listed %d jobs; want 2", len(list.Jobs))
	}
}
