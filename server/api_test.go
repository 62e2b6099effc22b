package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/server"
)

func TestBatchEnqueueIsAtomic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.req("POST", "/api/v1/jobs", []map[string]any{
		{"type": "a", "queue": "batch"},
		{"type": "b", "queue": "batch", "priority": 1000},
		{"type": "c", "queue": "batch"},
	})
	if r.status != http.StatusBadRequest {
		t.Fatalf("batch with an invalid item: %d %s; want 400", r.status, r.body)
	}
	var body struct {
		Error struct {
			Code, Field string
			Index       *int
		}
	}
	r.decode(t, &body)
	if body.Error.Code != "invalid_argument" || body.Error.Field != "priority" || body.Error.Index == nil || *body.Error.Index != 1 {
		t.Fatalf("error %s; want invalid_argument on item 1 field priority", r.body)
	}
	if jobs := e.claim("batch", 10); len(jobs) != 0 {
		t.Fatalf("after a refused batch %d jobs are claimable; want none written", len(jobs))
	}

	r = e.req("POST", "/api/v1/jobs", []map[string]any{
		{"type": "a", "queue": "batch", "unique_key": "k"},
		{"type": "b", "queue": "batch", "unique_key": "k"},
		{"type": "c", "queue": "batch", "payload_b64": "AAEC"},
	})
	var out []struct {
		ID, State string
		Duplicate bool
	}
	r.decode(t, &out)
	if r.status != http.StatusCreated || len(out) != 3 || out[0].Duplicate || !out[1].Duplicate || out[1].ID != out[0].ID || out[2].Duplicate {
		t.Fatalf("batch with a duplicate key: %d %s; want 201, item 1 a duplicate of item 0", r.status, r.body)
	}
	if jobs := e.claim("batch", 10); len(jobs) != 2 {
		t.Fatalf("claimed %d jobs after the batch; want 2", len(jobs))
	}
}

func TestUniqueDuplicateIs409WithID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "t", "unique_key": "only-one"})
	r := e.req("POST", "/api/v1/jobs", map[string]any{"type": "t", "unique_key": "only-one"})
	var body struct{ Error struct{ Code, ID string } }
	r.decode(t, &body)
	if r.status != http.StatusConflict || body.Error.Code != "duplicate" || body.Error.ID != id {
		t.Fatalf("duplicate: %d %s; want 409 duplicate naming %s", r.status, r.body, id)
	}
}

func TestPayloadBytesExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// Whitespace and key order inside the payload are kept byte for byte.
	raw := `{"type":"t","queue":"exact","payload":{ "b" : 1,  "a":[1, 2] }}`
	r := e.req("POST", "/api/v1/jobs", raw)
	if r.status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", r.status, r.body)
	}
	var en struct{ ID string }
	r.decode(t, &en)
	var got struct {
		Payload    json.RawMessage
		PayloadB64 []byte `json:"payload_b64"`
	}
	e.req("GET", "/api/v1/jobs/"+en.ID, nil).decode(t, &got)
	if string(got.PayloadB64) != `{ "b" : 1,  "a":[1, 2] }` {
		t.Fatalf("payload came back as %s / %q; want the exact bytes sent", got.Payload, got.PayloadB64)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := `{"type":"t","queue":"idem"}`
	first := e.req("POST", "/api/v1/jobs", body, "Idempotency-Key", "abc-1")
	second := e.req("POST", "/api/v1/jobs", body, "Idempotency-Key", "abc-1")
	if first.status != http.StatusCreated || second.status != http.StatusCreated || string(first.body) != string(second.body) {
		t.Fatalf("retried request: %d %s then %d %s; want the same 201 answer", first.status, first.body, second.status, second.body)
	}
	if second.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the replay is not marked Idempotent-Replayed")
	}
	if jobs := e.claim("idem", 10); len(jobs) != 1 {
		t.Fatalf("%d jobs written for one idempotent request sent twice; want 1", len(jobs))
	}
	other := e.req("POST", "/api/v1/jobs", `{"type":"other","queue":"idem"}`, "Idempotency-Key", "abc-1")
	if other.status != http.StatusConflict || other.errCode(t) != "idempotency_conflict" {
		t.Fatalf("key reused with another body: %d %s; want 409 idempotency_conflict", other.status, other.body)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, c := range []struct{ method, path, auth string }{
		{"GET", "/api/v1/jobs/x", ""},
		{"POST", "/api/v1/jobs", "Bearer wrong"},
		{"GET", "/metrics", ""},
		{"GET", "/api/v1/no-such-thing", ""},
		{"POST", "/api/v1/claim", "Basic " + testToken},
	} {
		r := e.req(c.method, c.path, nil, "Authorization", c.auth)
		if r.status != http.StatusUnauthorized || r.errCode(t) != "unauthorized" {
			t.Errorf("%s %s with %q: %d %s; want 401", c.method, c.path, c.auth, r.status, r.body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/api/v1/openapi.json"} {
		if r := e.req("GET", path, nil, "Authorization", ""); r.status != http.StatusOK {
			t.Errorf("GET %s without a token: %d; want 200 (open)", path, r.status)
		}
	}
	if r := e.req("GET", "/metrics", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "kyu_http_requests_total") {
		t.Errorf("GET /metrics with the token: %d; want 200 with kyu metrics", r.status)
	}
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxPayload = 1 << 10 })
	id := e.enqueue(map[string]any{"type": "t", "queue": "errs"})
	jobs := e.claim("errs", 1)
	cases := []struct {
		name    string
		method  string
		path    string
		body    any
		headers []string
		status  int
		code    string
	}{
		{"malformed JSON", "POST", "/api/v1/jobs", `{"type":`, nil, 400, "invalid_argument"},
		{"unknown field", "POST", "/api/v1/jobs", `{"type":"t","colour":"red"}`, nil, 400, "invalid_argument"},
		{"bad duration", "POST", "/api/v1/claim", `{"wait":"soon"}`, nil, 400, "invalid_argument"},
		{"payload over the limit", "POST", "/api/v1/jobs", map[string]any{"type": "t", "payload_b64": make([]byte, 2<<10)}, nil, 400, "invalid_argument"},
		{"no token", "GET", "/api/v1/jobs/" + id, nil, []string{"Authorization", ""}, 401, "unauthorized"},
		{"unknown job", "GET", "/api/v1/jobs/" + newID(t), nil, nil, 404, "not_found"},
		{"unknown path", "GET", "/api/v2/jobs", nil, nil, 404, "not_found"},
		{"wrong method", "PUT", "/api/v1/jobs", `{}`, nil, 405, "method_not_allowed"},
		{"stale lease", "POST", "/api/v1/jobs/" + id + "/complete", map[string]any{"lease_token": jobs[0].LeaseToken + 1}, nil, 409, "lease_lost"},
		{"delete active", "DELETE", "/api/v1/jobs/" + id, nil, nil, 409, "job_active"},
		{"body too large", "POST", "/api/v1/jobs", `{"type":"t","payload":"` + strings.Repeat("x", 2<<20) + `"}`, nil, 413, "payload_too_large"},
		{"not JSON", "POST", "/api/v1/jobs", `type=t`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
	}
	for _, c := range cases {
		r := e.req(c.method, c.path, c.body, c.headers...)
		if r.status != c.status || r.errCode(t) != c.code {
			t.Errorf("%s: %d %s; want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}
	if r := e.req("PUT", "/api/v1/jobs", `{}`); r.header.Get("Allow") != "GET, POST" {
		t.Errorf("405 answer's Allow = %q; want \"GET, POST\"", r.header.Get("Allow"))
	}

	// 503: the backend no longer answers.
	e.store.Close()
	if r := e.req("GET", "/readyz", nil); r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" {
		t.Errorf("readyz over a closed store: %d %s; want 503", r.status, r.body)
	}
	if r := e.req("GET", "/api/v1/jobs/"+id, nil); r.status != http.StatusServiceUnavailable || r.errCode(t) != "backend_closed" {
		t.Errorf("get over a closed store: %d %s; want 503", r.status, r.body)
	}
	if r := e.req("GET", "/healthz", nil); r.status != http.StatusOK {
		t.Errorf("healthz over a closed store: %d; want 200 (the process lives)", r.status)
	}
}

func TestRefusesOpenAddressWithoutToken(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	_, err := server.New(server.Config{Backend: store, Addr: "0.0.0.0:7420"})
	if err == nil || !strings.Contains(err.Error(), "without a token") {
		t.Fatalf("New on 0.0.0.0 without a token: %v; want a refusal that says why", err)
	}
	for _, cfg := range []server.Config{
		{Backend: store, Addr: "0.0.0.0:7420", Token: "t"},
		{Backend: store, Addr: "0.0.0.0:7420", Insecure: true},
		{Backend: store, Addr: "[::1]:7420"},
		{Backend: store, Addr: "localhost:7420"},
	} {
		if _, err := server.New(cfg); err != nil {
			t.Errorf("New(%+v): %v; want accepted", cfg.Addr, err)
		}
	}
}

func TestLeaseCallsOneAndBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.enqueue(map[string]any{"type": "t", "queue": "leases"})
	b := e.enqueue(map[string]any{"type": "t", "queue": "leases"})
	c := e.enqueue(map[string]any{"type": "t", "queue": "leases"})
	jobs := e.claim("leases", 3)
	if len(jobs) != 3 {
		t.Fatalf("claimed %d; want 3", len(jobs))
	}
	tok := map[string]int64{}
	for _, j := range jobs {
		tok[j.ID] = j.LeaseToken
	}
	r := e.req("POST", "/api/v1/jobs/"+a+"/heartbeat", map[string]any{"lease_token": tok[a], "extend": "1m"})
	var st struct {
		Lost      bool
		ExpiresAt time.Time `json:"expires_at"`
	}
	r.decode(t, &st)
	if r.status != 200 || st.Lost || st.ExpiresAt.IsZero() {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/leases/heartbeat", map[string]any{"leases": []map[string]any{{"id": a, "lease_token": tok[a]}, {"id": b, "lease_token": 99}}})
	var hb struct{ Leases []struct{ Lost bool } }
	r.decode(t, &hb)
	if r.status != 200 || len(hb.Leases) != 2 || hb.Leases[0].Lost || !hb.Leases[1].Lost {
		t.Fatalf("batch heartbeat: %d %s; want the second lost", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/leases/complete", map[string]any{"items": []map[string]any{
		{"id": a, "lease_token": tok[a], "result": []int{1}},
		{"id": b, "lease_token": tok[b] + 1},
		{"id": newID(t), "lease_token": 1},
	}})
	var br struct {
		Results []struct {
			OK    bool
			Error *struct{ Code string }
		}
	}
	r.decode(t, &br)
	if r.status != 200 || len(br.Results) != 3 || !br.Results[0].OK || br.Results[1].Error == nil || br.Results[1].Error.Code != "lease_lost" || br.Results[2].Error == nil || br.Results[2].Error.Code != "not_found" {
		t.Fatalf("batch complete: %d %s; want ok, lease_lost, not_found", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/leases/fail", map[string]any{"items": []map[string]any{{"id": b, "lease_token": tok[b], "message": "boom", "final": true}}})
	r.decode(t, &br)
	if r.status != 200 || !br.Results[0].OK {
		t.Fatalf("batch fail: %d %s", r.status, r.body)
	}
	r = e.req("POST", "/api/v1/jobs/"+c+"/release", map[string]any{"lease_token": tok[c]})
	if r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	var got struct {
		State  string
		Errors []struct{ Kind, Message string }
	}
	e.req("GET", "/api/v1/jobs/"+b, nil).decode(t, &got)
	if got.State != "failed" || len(got.Errors) != 1 || got.Errors[0].Message != "boom" {
		t.Fatalf("failed job: %+v", got)
	}
	e.req("GET", "/api/v1/jobs/"+c, nil).decode(t, &got)
	if got.State != "pending" {
		t.Fatalf("released job is %s; want pending", got.State)
	}
}

func TestClaimLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	got := make(chan reply, 1)
	go func() {
		got <- e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"poll"}, "wait": "20s"})
	}()
	// Enqueue only once the claim waits (it holds a long-poll slot), so the
	// job reaches it through the wake-up, not its first try.
	waitUntil(t, 10*time.Second, func() bool { return inFlightClaims(e) >= 1 })
	id := e.enqueue(map[string]any{"type": "t", "queue": "poll"})
	select {
	case r := <-got:
		var out struct{ Jobs []claimed }
		r.decode(t, &out)
		if r.status != 200 || len(out.Jobs) != 1 || out.Jobs[0].ID != id {
			t.Fatalf("long-poll claim: %d %s; want job %s", r.status, r.body, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting claim did not return the job enqueued meanwhile within 15s")
	}
}

// TestClaimByType: a claim with types takes only jobs of those types, in
// queue order, and leaves the others pending for a claim without types;
// an empty type is refused.
func TestClaimByType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var ids []string
	for _, typ := range []string{"other", "mine", "other", "mine"} {
		ids = append(ids, e.enqueue(map[string]any{"type": typ, "queue": "typed"}))
	}
	var out struct{ Jobs []claimed }
	e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"typed"}, "max": 10, "types": []string{"mine"}}).decode(t, &out)
	if len(out.Jobs) != 2 || out.Jobs[0].ID != ids[1] || out.Jobs[1].ID != ids[3] {
		t.Fatalf("claim with types [mine]: %+v; want jobs %s and %s", out.Jobs, ids[1], ids[3])
	}
	out.Jobs = nil
	e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"typed"}, "max": 10}).decode(t, &out)
	if len(out.Jobs) != 2 || out.Jobs[0].ID != ids[0] || out.Jobs[1].ID != ids[2] {
		t.Fatalf("claim without types after a filtered one: %+v; want the skipped jobs %s and %s, in order", out.Jobs, ids[0], ids[2])
	}
	if r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"typed"}, "types": []string{""}}); r.status != 400 {
		t.Fatalf("claim with an empty type: %d %s; want 400", r.status, r.body)
	}
}

func TestWaitForResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "t", "queue": "wait"})
	got := make(chan reply, 1)
	go func() { got <- e.req("GET", "/api/v1/jobs/"+id+"/wait?timeout=20s", nil) }()
	jobs := e.claim("wait", 1)
	if r := e.req("POST", "/api/v1/jobs/"+id+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken, "result": "done"}); r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	select {
	case r := <-got:
		var j struct {
			State  string
			Result string
		}
		r.decode(t, &j)
		if r.status != 200 || j.State != "completed" || j.Result != "done" {
			t.Fatalf("wait: %d %s; want the completed job with its result", r.status, r.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not return within 15s of the completion")
	}
	// A wait that times out answers the job as it is.
	other := e.enqueue(map[string]any{"type": "t", "queue": "wait"})
	r := e.req("GET", "/api/v1/jobs/"+other+"/wait?timeout=10ms", nil)
	var j struct{ State string }
	r.decode(t, &j)
	if r.status != 200 || j.State != "pending" {
		t.Fatalf("timed-out wait: %d %s; want 200 with the pending job", r.status, r.body)
	}
}

func TestShutdownEndsLongPolls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	got := make(chan reply, 1)
	go func() {
		got <- e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"never"}, "wait": "60s"})
	}()
	// Wait until the claim holds its long-poll slot (the gauge
	// kyu_long_polls_in_flight); a sleep would be a guess.
	waitUntil(t, 10*time.Second, func() bool { return inFlightClaims(e) >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case r := <-got:
		if r.status != 200 {
			t.Fatalf("claim ended by shutdown: %d %s; want 200 with no jobs", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not end with the shutdown")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown took %s with a 60s claim waiting; want it ended at once", d)
	}
}

// inFlightClaims reads the server's gauge of long-polls in flight.
func inFlightClaims(e *env) float64 {
	r := e.req("GET", "/metrics", nil)
	for _, line := range strings.Split(string(r.body), "\n") {
		if strings.HasPrefix(line, "kyu_long_polls_in_flight ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, "kyu_long_polls_in_flight "), &v)
			return v
		}
	}
	return 0
}

// waitUntil polls cond every 10ms until it holds, failing after d.
func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.EventInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, ":") {
		t.Fatalf("first line %q; want the stream's opening comment", line)
	}
	id := e.enqueue(map[string]any{"type": "t", "queue": "events"})
	jobs := e.claim("events", 1)
	e.req("POST", "/api/v1/jobs/"+id+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken})
	seen := map[string]bool{}
	for !seen["enqueued"] || !seen["claimed"] || !seen["completed"] {
		name, data := readEvent(t, rd)
		if name != "job" {
			continue
		}
		var ev struct {
			Job struct{ ID, Change, State string }
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		if ev.Job.ID == id {
			seen[ev.Job.Change] = true
		}
	}
}

// readEvent reads one server-sent event (skipping comments).
func readEvent(t *testing.T, rd *bufio.Reader) (name, data string) {
	t.Helper()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(map[string]any{"type": "report.build", "queue": "metrics"})
	jobs := e.claim("metrics", 1)
	e.req("POST", "/api/v1/jobs/"+id+"/complete", map[string]any{"lease_token": jobs[0].LeaseToken})
	body := string(e.req("GET", "/metrics", nil).body)
	for _, want := range []string{
		`kyu_jobs_enqueued_total{queue="metrics",type="report.build"} 1`,
		`kyu_jobs_completed_total{queue="metrics",type="report.build"} 1`,
		`kyu_job_duration_seconds_count{queue="metrics",type="report.build"} 1`,
		`kyu_http_requests_total{code="201",route="POST /api/v1/jobs"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestOpenAPIListsExactlyTheRoutes compares the document's operations
// with the served routes, and sends a request to each route to see that it
// is served (not answered by the catch-all).
func TestOpenAPIListsExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	raw := e.req("GET", "/api/v1/openapi.json", nil).body
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	served := e.srv.Routes()
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented operations:\n%s\nserved routes:\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
	for _, rt := range served {
		method, path, _ := strings.Cut(rt, " ")
		path = strings.NewReplacer("{id}", newID(t), "{name}", "q", "{step}", "promote").Replace(path)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, method, e.base+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.hc.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", rt, err)
		}
		head := make([]byte, 512)
		n := 0
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			n, _ = io.ReadFull(resp.Body, head)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusMethodNotAllowed || strings.Contains(string(head[:n]), "no such endpoint") {
			t.Errorf("%s is documented but not served: %d %s", rt, resp.StatusCode, head[:n])
		}
	}
	if e.validated == 0 {
		t.Fatal("no answer was validated against the document")
	}
}

// TestValidationCatchesAWrongAnswer proves that the response check used by
// every test is not vacuous: an answer that breaks the schema is refused.
func TestValidationCatchesAWrongAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	raw := e.req("GET", "/api/v1/openapi.json", nil).body
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	schema := doc.Components.Schemas["Job"].Value
	bad := map[string]any{"id": "x", "state": "sleeping"}
	if err := schema.VisitJSON(bad, openapi3.EnableJSONSchema2020()); err == nil {
		t.Fatal("a job with an unknown state and missing fields passed the Job schema")
	}
}

// openStore opens a fresh embedded store closed with the test.
func openStore(t *testing.T) backend.Backend {
	t.Helper()
	return openStoreTB(t)
}

// openStoreTB opens a fresh embedded store closed with the test, fuzz
// target or benchmark.
func openStoreTB(t testing.TB) backend.Backend {
	t.Helper()
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// newID makes an id that names no job.
func newID(t *testing.T) string {
	t.Helper()
	id, err := backend.NewID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
