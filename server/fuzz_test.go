package server_test

import (
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
func fuzzPost(t *testing.T, h http.Handler, path, body string) {
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
