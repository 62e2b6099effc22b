package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
)

const testToken = "s3cret-test-token"

// env is one test's server over a fresh embedded store, with a client
// that checks every answer against the server's OpenAPI document.
type env struct {
	t      *testing.T
	srv    *server.Server
	store  backend.Backend
	base   string
	hc     *http.Client
	token  string
	router routers.Router
	// validated counts the answers checked against the document.
	mu        sync.Mutex
	validated int
}

// newEnv starts a server on a free loopback port with the test token;
// change adjusts its Config first.
func newEnv(t *testing.T, change func(*server.Config)) *env {
	t.Helper()
	return newEnvOver(t, openStore(t), change)
}

// newEnvOver starts a server over store.
func newEnvOver(t *testing.T, store backend.Backend, change func(*server.Config)) *env {
	t.Helper()
	cfg := server.Config{Backend: store, Addr: "127.0.0.1:0", Token: testToken, MaintenanceInterval: 50 * time.Millisecond}
	if change != nil {
		change(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	<-srv.Ready()
	e := &env{t: t, srv: srv, store: store, base: "http://" + srv.Addr().String(), hc: &http.Client{Timeout: 90 * time.Second}, token: cfg.Token}
	e.router = e.loadRouter()
	return e
}

// loadRouter fetches the OpenAPI document and checks that it loads and
// validates as OpenAPI 3.1 with kin-openapi.
func (e *env) loadRouter() routers.Router {
	e.t.Helper()
	resp, err := e.hc.Get(e.base + "/api/v1/openapi.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		e.t.Fatalf("load OpenAPI document: %v", err)
	}
	if doc.OpenAPIMajorMinor() != "3.1" {
		e.t.Fatalf("document is OpenAPI %s; want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		e.t.Fatalf("OpenAPI document does not validate: %v", err)
	}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		e.t.Fatalf("router from document: %v", err)
	}
	return r
}

// reply is one answer, body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v.
func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not the JSON expected: %v\n%s", r.status, err, r.body)
	}
}

// errCode returns the error code of an error answer.
func (r reply) errCode(t *testing.T) string {
	t.Helper()
	var b struct {
		Error struct {
			Code, Message, Field string
		}
	}
	r.decode(t, &b)
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error answer lacks code or message: %s", r.body)
	}
	return b.Error.Code
}

// req sends a request with the token, a JSON body (a string or bytes is
// sent as it is; anything else is encoded) and headers given as pairs,
// and validates the answer against the OpenAPI document.
func (e *env) req(method, path string, body any, headers ...string) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil || (method != "GET" && method != "HEAD") {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	e.validate(req, resp, raw)
	return reply{status: resp.StatusCode, header: resp.Header, body: raw}
}

// validate checks one answer against the document: the route must be in
// it and the body must match the schema of its status.
func (e *env) validate(req *http.Request, resp *http.Response, body []byte) {
	e.t.Helper()
	route, params, err := e.router.FindRoute(req)
	if err != nil {
		// Requests to unserved paths are answered 404/405 (or 401 under
		// /api/) and are not in the document by design; their bodies must
		// still be errors.
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUnauthorized:
			var b struct{ Error struct{ Code string } }
			if json.Unmarshal(body, &b) != nil || b.Error.Code == "" {
				e.t.Errorf("%s %s: %d answer is not a JSON error: %s", req.Method, req.URL.Path, resp.StatusCode, body)
			}
			return
		}
		e.t.Fatalf("%s %s: not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		e.t.Errorf("%s %s: answer %d does not match the OpenAPI document: %v\n%.500s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	e.mu.Lock()
	e.validated++
	e.mu.Unlock()
}

// enqueue enqueues one job and returns its id.
func (e *env) enqueue(job map[string]any) string {
	e.t.Helper()
	r := e.req("POST", "/api/v1/jobs", job)
	if r.status != http.StatusCreated {
		e.t.Fatalf("enqueue: %d %s", r.status, r.body)
	}
	var out struct{ ID string }
	r.decode(e.t, &out)
	return out.ID
}

// claimed is the part of a claimed job the tests use.
type claimed struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	State      string          `json:"state"`
	LeaseToken int64           `json:"lease_token"`
	Payload    json.RawMessage `json:"payload"`
}

// claim claims up to max jobs from queue without waiting.
func (e *env) claim(queue string, max int) []claimed {
	e.t.Helper()
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{queue}, "max": max, "lease": "30s", "worker": "test"})
	if r.status != http.StatusOK {
		e.t.Fatalf("claim: %d %s", r.status, r.body)
	}
	var out struct{ Jobs []claimed }
	r.decode(e.t, &out)
	return out.Jobs
}
