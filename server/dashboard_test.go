package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
	"github.com/kyuhq/kyu/server/api"
	"github.com/kyuhq/kyu/server/dashboard"
)

// page fetches path without following redirects, with the given cookie.
func (e *env) page(path string, cookie *http.Cookie) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), "GET", e.base+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login posts the token to the login form and returns the session cookie
// set, if any, and the status.
func (e *env) login(token string) (*http.Cookie, int) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), "POST", e.base+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/jobs"}}.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == dashboard.CookieName {
			return c, resp.StatusCode
		}
	}
	return nil, resp.StatusCode
}

// TestDashboardOverviewWithoutToken checks that GET / answers the
// overview page itself (200, HTML, no redirect) with a CSP that allows no
// inline script, and that unknown pages answer an HTML 404 while unknown
// API paths keep their JSON 404.
func TestDashboardOverviewWithoutToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.Token = "" })
	resp, body := e.page("/", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `data-page="overview"`) {
		t.Fatalf("GET / = %d %s %.200q; want the overview page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q; want scripts from the server only, none inline", csp)
	}
	if strings.Contains(body, "<script>") {
		t.Errorf("the page holds an inline script")
	}
	for _, p := range []string{"/jobs", "/jobs/0190", "/queues", "/workers", "/enqueue", "/static/app.js", "/static/style.css"} {
		if resp, _ := e.page(p, nil); resp.StatusCode != 200 {
			t.Errorf("GET %s = %d; want 200", p, resp.StatusCode)
		}
	}
	if resp, body := e.page("/nope", nil); resp.StatusCode != 404 || !strings.Contains(body, "<html") {
		t.Errorf("GET /nope = %d %.100q; want an HTML 404", resp.StatusCode, body)
	}
	if r := e.req("GET", "/api/v1/nope", nil); r.status != 404 || r.errCode(t) != api.CodeNotFound {
		t.Errorf("GET /api/v1/nope = %d; want a JSON 404", r.status)
	}
}

// TestDashboardLogin checks the login flow with a token: pages redirect
// to the login page; a wrong token sets no cookie; the right one sets an
// HttpOnly, SameSite=Strict session cookie that opens the pages and the
// API (the bearer header keeps working); a tampered cookie opens nothing.
func TestDashboardLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp, _ := e.page("/jobs?state=failed", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next="+url.QueryEscape("/jobs?state=failed") {
		t.Fatalf("GET /jobs without a session = %d to %q; want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c, status := e.login("wrong"); c != nil || status != http.StatusUnauthorized {
		t.Fatalf("login with a wrong token = %d, cookie %v; want 401 and none", status, c)
	}
	c, status := e.login(testToken)
	if c == nil || status != http.StatusSeeOther {
		t.Fatalf("login with the token = %d, cookie %v; want 303 and a cookie", status, c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, not Secure over plain HTTP, path /", c)
	}
	if resp, _ := e.page("/jobs", c); resp.StatusCode != 200 {
		t.Errorf("GET /jobs with the session = %d; want 200", resp.StatusCode)
	}
	if resp, _ := e.page("/api/v1/queues", c); resp.StatusCode != 200 {
		t.Errorf("GET /api/v1/queues with the session = %d; want 200", resp.StatusCode)
	}
	bad := *c
	bad.Value = "99999999999." + strings.SplitN(c.Value, ".", 2)[1]
	if resp, _ := e.page("/api/v1/queues", &bad); resp.StatusCode != 401 {
		t.Errorf("GET /api/v1/queues with a forged expiry = %d; want 401", resp.StatusCode)
	}
	if r := e.req("GET", "/api/v1/queues", nil); r.status != 200 {
		t.Errorf("bearer GET /api/v1/queues = %d; want 200", r.status)
	}
	// A session from a server with another token is worth nothing here.
	other := dashboard.NewSessions("another-token", server.DefaultSessionTTL).Cookie(time.Now(), "/", false)
	if resp, _ := e.page("/api/v1/queues", other); resp.StatusCode != 401 {
		t.Errorf("GET with another token's session = %d; want 401", resp.StatusCode)
	}
}

// TestDashboardSessionRefusesCrossOrigin checks that a state change with
// the session cookie that the browser marks cross-site is refused, and
// that the login form cannot be posted from another site either.
func TestDashboardSessionRefusesCrossOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c, _ := e.login(testToken)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+"/api/v1/jobs", strings.NewReader(`{"type":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site enqueue with the session = %d; want 403", resp.StatusCode)
	}
	req, _ = http.NewRequestWithContext(t.Context(), "POST", e.base+"/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin login = %d; want 403", resp.StatusCode)
	}
}

// TestDashboardBasePath checks that with a base path the pages, their
// links and the API answer under it, and nothing answers outside it.
func TestDashboardBasePath(t *testing.T) {
	t.Parallel()
	srv, err := server.New(server.Config{Backend: openStore(t), Token: testToken, BasePath: "/ops/kyu", MaintenanceInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	e := &env{t: t, base: ts.URL, hc: ts.Client(), token: testToken}
	resp, _ := e.page("/ops/kyu/", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/kyu/login?next=%2F" {
		t.Fatalf("GET /ops/kyu/ = %d to %q; want 303 to /ops/kyu/login", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+"/ops/kyu/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		c = k
	}
	if c == nil || c.Path != "/ops/kyu/" || resp.Header.Get("Location") != "/ops/kyu/" {
		t.Fatalf("login under the base path: cookie %v, to %q; want a cookie for /ops/kyu/ and / under it", c, resp.Header.Get("Location"))
	}
	resp, body := e.page("/ops/kyu", c)
	if resp.StatusCode != 200 || !strings.Contains(body, `href="/ops/kyu/static/style.css"`) || !strings.Contains(body, `data-base="/ops/kyu"`) {
		t.Fatalf("GET /ops/kyu = %d %.300q; want the overview with links under the base path", resp.StatusCode, body)
	}
	if resp, _ := e.page("/ops/kyu/api/v1/openapi.json", nil); resp.StatusCode != 200 {
		t.Errorf("GET /ops/kyu/api/v1/openapi.json = %d; want 200", resp.StatusCode)
	}
	if resp, _ := e.page("/", nil); resp.StatusCode != 404 {
		t.Errorf("GET / outside the base path = %d; want 404", resp.StatusCode)
	}
}

// TestReadOnlyRefusesWritesButServesWorkers checks that a read-only
// server refuses every change people make (403, nothing changed) and
// still serves claims, heartbeats and completions, so workers run on.
func TestReadOnlyRefusesWritesButServesWorkers(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	rw := newEnvOver(t, store, nil)
	id := rw.enqueue(map[string]any{"type": "t", "queue": "ro"})
	failedID := rw.enqueue(map[string]any{"type": "t", "queue": "ro2", "max_attempts": 1})
	e := newEnvOver(t, store, func(c *server.Config) { c.ReadOnly = true })

	refused := []struct{ method, path, body string }{
		{"POST", "/api/v1/jobs", `{"type":"x"}`},
		{"POST", "/api/v1/jobs/" + id + "/cancel", ""},
		{"POST", "/api/v1/jobs/" + id + "/retry", ""},
		{"POST", "/api/v1/jobs/" + id + "/run", ""},
		{"DELETE", "/api/v1/jobs/" + id, ""},
		{"POST", "/api/v1/jobs/bulk", `{"action":"delete"}`},
		{"POST", "/api/v1/queues/ro/pause", ""},
		{"PATCH", "/api/v1/queues/ro", `{"paused":true}`},
		{"POST", "/api/v1/queues/ro/retry", ""},
		{"DELETE", "/api/v1/queues/ro/jobs?state=pending", ""},
	}
	for _, c := range refused {
		var body any
		if c.body != "" {
			body = c.body
		}
		if r := e.req(c.method, c.path, body); r.status != http.StatusForbidden || r.errCode(t) != api.CodeForbidden {
			t.Errorf("read-only %s %s = %d %s; want 403", c.method, c.path, r.status, r.body)
		}
	}
	var j api.Job
	e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &j)
	if j.State != backend.StatePending {
		t.Fatalf("job after the refused calls is %s; want pending, unchanged", j.State)
	}
	// The worker side still works.
	got := e.claim("ro2", 1)
	if len(got) != 1 || got[0].ID != failedID {
		t.Fatalf("claim on a read-only server = %+v; want the job", got)
	}
	if r := e.req("POST", "/api/v1/jobs/"+failedID+"/heartbeat", map[string]any{"lease_token": got[0].LeaseToken, "extend": "30s"}); r.status != 200 {
		t.Fatalf("heartbeat on a read-only server = %d %s; want 200", r.status, r.body)
	}
	if r := e.req("POST", "/api/v1/jobs/"+failedID+"/complete", map[string]any{"lease_token": got[0].LeaseToken}); r.status != 200 {
		t.Fatalf("complete on a read-only server = %d %s; want 200", r.status, r.body)
	}
	resp, body := e.page("/jobs", mustLogin(e))
	if resp.StatusCode != 200 || !strings.Contains(body, `data-readonly="true"`) || strings.Contains(body, `/enqueue"`) {
		t.Errorf("read-only jobs page = %d; want it marked read-only without the enqueue link", resp.StatusCode)
	}
}

// mustLogin logs in with the test token.
func mustLogin(e *env) *http.Cookie {
	e.t.Helper()
	c, _ := e.login(testToken)
	if c == nil {
		e.t.Fatal("login with the token set no cookie")
	}
	return c
}

// TestBulkAction checks POST /api/v1/jobs/bulk: a dry run counts the
// matches (capped, saying more match), the action retries exactly the
// matching jobs up to the limit, and jobs the action does not fit are
// reported, not changed.
func TestBulkAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var ids []string
	for range 5 {
		ids = append(ids, e.enqueue(map[string]any{"type": "bulk", "queue": "bq", "max_attempts": 1, "tags": []string{"x"}}))
	}
	other := e.enqueue(map[string]any{"type": "bulk", "queue": "other", "max_attempts": 1})
	for _, c := range e.claim("bq", 5) {
		if r := e.req("POST", "/api/v1/jobs/"+c.ID+"/fail", map[string]any{"lease_token": c.LeaseToken, "message": "boom"}); r.status != 200 {
			t.Fatalf("fail: %d %s", r.status, r.body)
		}
	}
	filter := map[string]any{"state": "failed", "queue": "bq", "tag": "x"}
	var res api.BulkResult
	e.req("POST", "/api/v1/jobs/bulk", map[string]any{"filter": filter, "action": "retry", "dry_run": true, "limit": 3}).decode(t, &res)
	if res.Matched != 3 || !res.More || res.Done != 0 {
		t.Fatalf("dry run with limit 3 = %+v; want 3 matched, more, none done", res)
	}
	e.req("POST", "/api/v1/jobs/bulk", map[string]any{"filter": filter, "action": "retry", "dry_run": true}).decode(t, &res)
	if res.Matched != 5 || res.More {
		t.Fatalf("dry run = %+v; want 5 matched, no more", res)
	}
	e.req("POST", "/api/v1/jobs/bulk", map[string]any{"filter": filter, "action": "retry", "limit": 4}).decode(t, &res)
	if res.Matched != 4 || res.Done != 4 || len(res.Errors) != 0 {
		t.Fatalf("bulk retry limit 4 = %+v; want 4 done", res)
	}
	pending := 0
	for _, id := range ids {
		var j api.Job
		e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &j)
		if j.State == backend.StatePending {
			pending++
		}
	}
	if pending != 4 {
		t.Fatalf("%d jobs pending after the bulk retry; want 4", pending)
	}
	// Retry applies to failed jobs only: a filter over the queue's pending
	// ones reports each refusal.
	e.req("POST", "/api/v1/jobs/bulk", map[string]any{"filter": map[string]any{"queue": "other"}, "action": "retry"}).decode(t, &res)
	if res.Matched != 1 || res.Done != 0 || len(res.Errors) != 1 || res.Errors[0].ID != other || res.Errors[0].Code != api.CodeWrongState {
		t.Fatalf("bulk retry of a pending job = %+v; want one wrong_state refusal", res)
	}
	for _, bad := range []map[string]any{
		{"action": "explode"},
		{"action": "retry", "limit": server.MaxBulkLimit + 1},
		{"action": "retry", "filter": map[string]any{"state": "bogus"}},
	} {
		if r := e.req("POST", "/api/v1/jobs/bulk", bad); r.status != 400 {
			t.Errorf("bulk %v = %d %s; want 400", bad, r.status, r.body)
		}
	}
}

// TestDashboardLoginOverTLS checks that the session cookie is marked
// Secure when the login came over TLS.
func TestDashboardLoginOverTLS(t *testing.T) {
	t.Parallel()
	srv, err := server.New(server.Config{Backend: openStore(t), Token: testToken, MaintenanceInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv.Handler())
	defer ts.Close()
	hc := ts.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.PostForm(ts.URL+"/login", url.Values{"token": {testToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly {
		t.Fatalf("login over TLS = %d, cookies %+v; want 303 and one Secure, HttpOnly cookie", resp.StatusCode, cookies)
	}
}
