package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// fuzzHandler builds a server's handler (no listener) over a fresh store.
func fuzzHandler(f *testing.F) http.Handler {
	store := openStoreTB(f)
	srv, err := server.New(server.Config{Backend: store, MaxPayload: 64 << 10, MaxWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	return srv.Handler()
}

// fuzzPost sends body to path and fails on a server error.
func fuzzPost(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Host = "127.0.0.1" // a server without a token answers loopback names only
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("POST %s with %q: %d %s", path, body, rec.Code, rec.Body)
	}
	if rec.Code >= 400 && !strings.Contains(rec.Body.String(), `"code"`) {
		t.Fatalf("POST %s with %q: %d answer is not a JSON error: %s", path, body, rec.Code, rec.Body)
	}
	return rec
}

func FuzzEnqueueBody(f *testing.F) {
	for _, seed := range []string{
		`{"type":"t"}`,
		`[{"type":"a","payload":{"x":[1,2]}},{"type":"b","payload_b64":"AAE="}]`,
		`{"type":"t","delay":"1h","deadline":"2030-01-01T00:00:00Z","unique_key":"k","unique_for":"1m","retention":"none"}`,
		`{"type":"t","run_at":"9999-12-31T23:59:59Z","priority":-100,"max_attempts":-1}`,
		`{"type":"t","timeout":"-5s","tags":["a"],"metadata":{"k":"v"}}`,
		`[]`, `null`, `{"type":`, `[{"type":"t"},]`, `{"type":"t","delay":"1h","run_at":"2030-01-01T00:00:00Z"}`,
		`{"type":"t","payload":null,"payload_b64":"!!"}`, `"string"`, `{"type":"t","retention":"-1s"}`,
	} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzPost(t, h, "/api/v1/jobs", body)
	})
}

func FuzzClaimBody(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `{"queues":["default"],"max":10,"lease":"30s"}`,
		`{"queues":["a","b"],"mode":"weighted","weights":{"a":3},"worker":"w"}`,
		`{"queues":[""],"max":-1}`, `{"lease":"0s"}`, `{"lease":"2562047h"}`, `{"mode":"random"}`,
		`{"max":100000}`, `{"queues":null}`, `[1]`, `{"wait":"-1s"}`,
	} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzPost(t, h, "/api/v1/claim", body)
	})
}

// fuzzLimitsHandler builds a handler with small limits, so that fuzzed
// bodies reach them: 3 jobs per batch, 4 KiB payloads, 2 KiB answers.
func fuzzLimitsHandler(f *testing.F) http.Handler {
	store := openStoreTB(f)
	srv, err := server.New(server.Config{Backend: store, MaxPayload: 4 << 10, MaxBatch: 3, MaxResponseBytes: 2 << 10, MaxWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	return srv.Handler()
}

func FuzzBatchEnqueueBody(f *testing.F) {
	for _, seed := range []string{
		`[{"type":"a"},{"type":"b"},{"type":"c"}]`,
		`[{"type":"a"},{"type":"b"},{"type":"c"},{"type":"d"}]`,
		`[{"type":"a","title":",,,,","tags":["a,b","c"]},{"type":"b","metadata":{"k":"]["}}]`,
		`[{"type":"a","payload_b64":"` + strings.Repeat("A", 5464) + `"}]`,
		`[{"type":"a","tags":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17","18","19","20","21","22","23","24","25","26","27","28","29","30","31","32","33"]}]`,
		`[{"type":"a","title":"\",\",\",\""},{"type":"b"}]`, `[,,,,]`, `[[[[`, `["\\\"",1,2,3]`, ` [ {"type":"t"} , {"type":"t"} ] `,
	} {
		f.Add(seed)
	}
	h := fuzzLimitsHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzPost(t, h, "/api/v1/jobs", body)
	})
}

func FuzzLeaseBodies(f *testing.F) {
	for _, seed := range []struct {
		path, body string
	}{
		{"/api/v1/claim", `{"queues":["default"],"max":1000}`},
		{"/api/v1/claim", `{"max":2,"lease":"1s"}`},
		{"/api/v1/leases/heartbeat", `{"leases":[{"id":"x","lease_token":1}],"extend":"10s"}`},
		{"/api/v1/leases/complete", `{"items":[{"id":"x","lease_token":1,"result":{"a":1}}]}`},
		{"/api/v1/leases/fail", `{"items":[{"id":"x","lease_token":1,"message":"m","retry_at":"2030-01-01T00:00:00Z"}]}`},
		{"/api/v1/leases/release", `{"leases":[{"id":"x","lease_token":1}]}`},
		{"/api/v1/leases/report", `{"max_log_lines":2,"items":[{"id":"x","lease_token":1,"progress":{"percent":50},"logs":["a","b","c"]}]}`},
		{"/api/v1/leases/release", `{"leases":null}`},
	} {
		f.Add(seed.path, seed.body)
	}
	h := fuzzLimitsHandler(f)
	// Jobs to claim, large enough that a claim of several reaches the
	// answer's bound.
	enq := httptest.NewRequest("POST", "/api/v1/jobs", strings.NewReader(`[{"type":"t","payload_b64":"`+strings.Repeat("A", 1400)+`"},{"type":"t","payload_b64":"`+strings.Repeat("A", 1400)+`"},{"type":"t"}]`))
	enq.Host = "127.0.0.1"
	enq.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, enq)
	if rec.Code != http.StatusCreated {
		f.Fatalf("enqueue the jobs to claim: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, path, body string) {
		switch path {
		case "/api/v1/claim", "/api/v1/leases/heartbeat", "/api/v1/leases/complete", "/api/v1/leases/fail", "/api/v1/leases/release", "/api/v1/leases/report":
		default:
			t.Skip()
		}
		rec := fuzzPost(t, h, path, body)
		if path == "/api/v1/claim" && rec.Code == http.StatusOK {
			var out struct{ Jobs []json.RawMessage }
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("claim answer is not JSON: %v", err)
			}
			if len(out.Jobs) > 1 && rec.Body.Len() > 2<<10+64 {
				t.Fatalf("claim answer of %d jobs is %d bytes; want at most the bound of 2 KiB", len(out.Jobs), rec.Body.Len())
			}
		}
	})
}
