package server_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server"
)

// browserReq is one request as a browser would send it: host, when set,
// replaces the Host header; headers are name, value pairs.
type browserReq struct {
	name    string
	method  string
	path    string
	body    string
	host    string
	headers []string
}

// send sends c to base and returns the status and error code of the answer
// ("" when it is no JSON error).
func (c browserReq) send(t *testing.T, base string) (int, string) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Set(c.headers[i], c.headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(raw, &eb) != nil || eb.Error.Message == "" {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, eb.Error.Code
}

// crossSite are the headers of a request a page on another site makes the
// browser send (mode is no-cors for fetch, navigate for a form post).
func crossSite(mode string, more ...string) []string {
	return append([]string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", mode}, more...)
}

// TestBrowserCannotWriteWithoutToken sends, to a loopback server without a
// token, the requests a page on another site can make a browser send:
// none may change anything.
func TestBrowserCannotWriteWithoutToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.Token = "" })
	job := `{"type":"t","queue":"csrf"}`
	for _, c := range []browserReq{
		// fetch(url, {method: "POST", mode: "no-cors", body: new Blob([job])})
		{name: "no-cors fetch, Blob body", method: "POST", path: "/api/v1/jobs", body: job,
			headers: crossSite("no-cors", "Sec-Fetch-Dest", "empty")},
		// <form method=post enctype=text/plain action=…/pause>
		{name: "form post", method: "POST", path: "/api/v1/queues/csrf/pause", body: "a=b",
			headers: crossSite("navigate", "Sec-Fetch-Dest", "document", "Content-Type", "application/x-www-form-urlencoded")},
		{name: "text/plain fetch", method: "POST", path: "/api/v1/jobs", body: job,
			headers: crossSite("no-cors", "Content-Type", "text/plain;charset=UTF-8")},
		// A browser without Sec-Fetch-Site still sends Origin.
		{name: "old browser", method: "POST", path: "/api/v1/queues/csrf/pause",
			headers: []string{"Origin", "http://evil.example", "Content-Type", "application/x-www-form-urlencoded"}},
	} {
		if status, code := c.send(t, e.base); status != http.StatusForbidden || code != "forbidden" {
			t.Errorf("%s: %d %q; want 403 forbidden", c.name, status, code)
		}
	}
	// DNS rebinding: evil.example resolves to 127.0.0.1, so the page is
	// same-origin with the server and may send JSON without a preflight.
	_, port, _ := net.SplitHostPort(e.srv.Addr().String())
	rebound := "evil.example:" + port
	for _, c := range []browserReq{
		{name: "rebound enqueue", method: "POST", path: "/api/v1/jobs", body: job, host: rebound,
			headers: []string{"Origin", "http://" + rebound, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}},
		{name: "rebound read", method: "GET", path: "/api/v1/jobs", host: rebound,
			headers: []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		if status, code := c.send(t, e.base); status != http.StatusForbidden || code != "forbidden" {
			t.Errorf("%s: %d %q; want 403 forbidden", c.name, status, code)
		}
	}
	if r := e.req("GET", "/api/v1/jobs?queue=csrf", nil); !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Errorf("jobs after the cross-site requests: %s; want none", r.body)
	}
	if r := e.req("GET", "/api/v1/queues", nil); strings.Contains(string(r.body), `"paused":true`) {
		t.Errorf("queues after the cross-site requests: %s; want none paused", r.body)
	}
}

// TestStateChangesNeedJSON checks that every state change, body or not,
// must say Content-Type: application/json, so that no page can send one
// without a CORS preflight.
func TestStateChangesNeedJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.Token = "" })
	for _, c := range []browserReq{
		{name: "enqueue without Content-Type", method: "POST", path: "/api/v1/jobs", body: `{"type":"t","queue":"ct"}`},
		{name: "pause without Content-Type", method: "POST", path: "/api/v1/queues/ct/pause"},
		{name: "pause as a form", method: "POST", path: "/api/v1/queues/ct/pause", headers: []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{name: "delete as text", method: "DELETE", path: "/api/v1/queues/ct/jobs?state=pending", headers: []string{"Content-Type", "text/plain"}},
	} {
		if status, code := c.send(t, e.base); status != http.StatusUnsupportedMediaType || code != "unsupported_media_type" {
			t.Errorf("%s: %d %q; want 415 unsupported_media_type", c.name, status, code)
		}
	}
	ok := browserReq{name: "pause with JSON", method: "POST", path: "/api/v1/queues/ct/pause", headers: []string{"Content-Type", "application/json"}}
	if status, _ := ok.send(t, e.base); status != http.StatusOK {
		t.Errorf("%s: %d; want 200", ok.name, status)
	}
}

// TestHostNames checks which Host names a server without a token answers
// to, and that a token lifts the check.
func TestHostNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.Token = ""; c.AllowedHosts = []string{"Kyu.Internal"} })
	for host, want := range map[string]int{
		"127.0.0.1:1":       200,
		"localhost":         200,
		"LOCALHOST:7420":    200,
		"[::1]:7420":        200,
		"[::1]":             200,
		"kyu.internal:8443": 200,
		"kyu.internal":      200,
		"evil.example":      403,
		"127.0.0.1.nip.io":  403,
		"localhost.evil.io": 403,
	} {
		c := browserReq{name: host, method: "GET", path: "/api/v1/jobs", host: host}
		if status, _ := c.send(t, e.base); status != want {
			t.Errorf("Host %q: %d; want %d", host, status, want)
		}
	}
	withToken := newEnv(t, nil)
	c := browserReq{name: "token", method: "GET", path: "/healthz", host: "kyu.example.com"}
	if status, _ := c.send(t, withToken.base); status != http.StatusOK {
		t.Errorf("Host kyu.example.com on a server with a token: %d; want 200", status)
	}
}
