package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server"
)

// TestUncleanPathsAnswerJSON checks that a path with "//", "." or ".."
// gets a JSON 404 (401 under /api/ without the token), not the mux's
// redirect with an HTML body.
func TestUncleanPathsAnswerJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, c := range []struct {
		method, path, auth string
		status             int
		code               string
	}{
		{"GET", "/api/v1//jobs", "Bearer " + testToken, 404, "not_found"},
		{"POST", "/api/v1/./jobs", "Bearer " + testToken, 404, "not_found"},
		{"GET", "/api/v1/x/../queues", "Bearer " + testToken, 404, "not_found"},
		{"GET", "/api/v1//jobs", "", 401, "unauthorized"},
		{"GET", "/x/../healthz", "", 404, "not_found"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, e.base+"/", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = c.path // sent as it is, not cleaned by the client
		req.Header.Set("Content-Type", "application/json")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := reply{status: resp.StatusCode, header: resp.Header, body: body}
		if resp.Header.Get("Content-Type") != "application/json" || r.status != c.status || r.errCode(t) != c.code {
			t.Errorf("%s %s: %d %s %s; want a JSON %d %s", c.method, c.path, r.status, resp.Header.Get("Content-Type"), body, c.status, c.code)
		}
	}
}

// TestOversizedHeadersAnswerJSON sends headers over the 64 KiB limit.
func TestOversizedHeadersAnswerJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.req("GET", "/api/v1/jobs", nil, "X-Big", strings.Repeat("x", 80<<10))
	if r.status != http.StatusRequestHeaderFieldsTooLarge || r.header.Get("Content-Type") != "application/json" || r.errCode(t) != "headers_too_large" {
		t.Fatalf("80 KiB of headers: %d %s %.200s; want a JSON 431 headers_too_large", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r := e.req("GET", "/api/v1/jobs", nil, "X-Big", strings.Repeat("x", 60<<10)); r.status != http.StatusOK {
		t.Fatalf("60 KiB of headers: %d; want 200 (within the limit)", r.status)
	}
}

// TestInsecureWarns checks that listening beyond loopback without a token
// is logged at WARN.
func TestInsecureWarns(t *testing.T) {
	t.Parallel()
	logged := &levels{}
	newEnv(t, func(c *server.Config) {
		c.Addr, c.Token, c.Insecure, c.Logger = "0.0.0.0:0", "", true, slog.New(logged)
	})
	warned := false
	for _, s := range logged.atLeast(slog.LevelWarn) {
		warned = warned || strings.Contains(s, "without a token")
	}
	if !warned {
		t.Fatalf("--insecure on 0.0.0.0 logged %q; want a warning that there is no token", logged.atLeast(slog.LevelInfo))
	}
}
