package server_test

import (
	"bufio"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/server"
	"github.com/kyuhq/kyu/server/faktory"
)

// fwpConn is a bare FWP connection for the server's tests.
type fwpConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// fwpHello connects to the server's Faktory listener and identifies,
// proving password when the greeting asks for one.
func fwpHello(t *testing.T, srv *server.Server, password string) *fwpConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", srv.FaktoryAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &fwpConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	greeting := c.line()
	var hi struct {
		S string `json:"s"`
		I int    `json:"i"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(greeting, "+HI ")), &hi); err != nil {
		t.Fatalf("greeting %q: %v", greeting, err)
	}
	hello := map[string]any{"v": 2, "wid": "node-1", "hostname": "h", "pid": 1}
	if hi.S != "" {
		hello["pwdhash"] = faktory.PasswordHash(password, hi.S, hi.I)
	}
	if a := c.cmd("HELLO", hello); a != "+OK" {
		t.Fatalf("HELLO answered %q", a)
	}
	return c
}

// line reads one answer line.
func (c *fwpConn) line() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	s, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// cmd sends verb with arg (JSON unless a string) and returns the answer:
// the line, or for a bulk string its body ("" for nil).
func (c *fwpConn) cmd(verb string, arg any) string {
	c.t.Helper()
	line := verb
	if s, ok := arg.(string); ok {
		line += " " + s
	} else if arg != nil {
		b, _ := json.Marshal(arg)
		line += " " + string(b)
	}
	if _, err := c.nc.Write([]byte(line + "\r\n")); err != nil {
		c.t.Fatal(err)
	}
	a := c.line()
	if !strings.HasPrefix(a, "$") {
		return a
	}
	n, _ := strconv.Atoi(a[1:])
	if n < 0 {
		return ""
	}
	buf := make([]byte, n+2)
	for read := 0; read < len(buf); {
		m, err := c.r.Read(buf[read:])
		if err != nil {
			c.t.Fatal(err)
		}
		read += m
	}
	return string(buf[:n])
}

// newFaktoryEnv starts a server with a Faktory listener over the memory
// store.
func newFaktoryEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOver(t, memory.New(), func(c *server.Config) { c.FaktoryAddr = "127.0.0.1:0" })
}

// TestFaktoryJobInAPI: a job pushed over FWP is an ordinary kyu job in
// the REST API, with its fields mapped; the password is the token.
func TestFaktoryJobInAPI(t *testing.T) {
	e := newFaktoryEnv(t)
	c := fwpHello(t, e.srv, testToken)
	if a := c.cmd("PUSH", map[string]any{
		"jid": "api-1", "jobtype": "Report", "args": []any{"a", 2}, "queue": "reports", "retry": 4,
		"reserve_for": 90, "priority": 3, "at": "2099-01-01T00:00:00Z", "custom": map[string]any{"tenant": 7},
	}); a != "+OK" {
		t.Fatalf("PUSH answered %q", a)
	}
	j, err := e.store.Get(t.Context(), backend.GetParams{JID: "api-1"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type        string            `json:"type"`
		Queue       string            `json:"queue"`
		State       string            `json:"state"`
		Priority    int               `json:"priority"`
		MaxAttempts int               `json:"max_attempts"`
		RunAt       time.Time         `json:"run_at"`
		Timeout     string            `json:"timeout"`
		Payload     json.RawMessage   `json:"payload"`
		Metadata    map[string]string `json:"metadata"`
	}
	r := e.req("GET", "/api/v1/jobs/"+j.ID, nil)
	r.decode(t, &got)
	if got.Type != "Report" || got.Queue != "reports" || got.State != "scheduled" || got.Priority != -50 || got.MaxAttempts != 5 ||
		!got.RunAt.Equal(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)) || string(got.Payload) != `["a",2]` ||
		got.Metadata[faktory.MetaCustom] != `{"tenant":7}` {
		t.Fatalf("job in the API: %+v (%s)", got, r.body)
	}
	if d, err := time.ParseDuration(got.Timeout); err != nil || d != 90*time.Second {
		t.Fatalf("timeout %q, want 90s", got.Timeout)
	}
	// The jid finds the job too.
	var byJID struct {
		ID  string `json:"id"`
		JID string `json:"jid"`
	}
	e.req("GET", "/api/v1/jobs/api-1", nil).decode(t, &byJID)
	if byJID.ID != j.ID || byJID.JID != "api-1" {
		t.Fatalf("GET /api/v1/jobs/api-1 answered %+v, want job %s", byJID, j.ID)
	}
	if r := e.req("GET", "/api/v1/jobs/no-such-jid", nil); r.status != 404 {
		t.Fatalf("an unknown jid answered %d", r.status)
	}
	// A worker connection is in the API's worker list.
	var ws []struct {
		ID string `json:"id"`
	}
	wr := e.req("GET", "/api/v1/workers", nil)
	var body struct {
		Workers json.RawMessage `json:"workers"`
	}
	wr.decode(t, &body)
	if err := json.Unmarshal(body.Workers, &ws); err != nil || len(ws) != 1 || ws[0].ID != "node-1" {
		t.Fatalf("workers %s", wr.body)
	}
}

// TestFaktoryReserveForExpires: a job not ACKed within reserve_for runs
// again once the server's maintenance recovers its lease.
func TestFaktoryReserveForExpires(t *testing.T) {
	e := newFaktoryEnv(t)
	c := fwpHello(t, e.srv, testToken)
	if a := c.cmd("PUSH", map[string]any{"jid": "lease-1", "jobtype": "t", "args": []any{}, "reserve_for": 1}); a != "+OK" {
		t.Fatalf("PUSH answered %q", a)
	}
	if a := c.cmd("FETCH", "default"); !strings.Contains(a, `"lease-1"`) {
		t.Fatalf("first FETCH answered %q", a)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		a := c.cmd("FETCH", "default")
		if strings.Contains(a, `"lease-1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not run again after its reserve_for")
		}
	}
	j, _ := e.store.Get(t.Context(), backend.GetParams{JID: "lease-1"})
	if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Kind != backend.AttemptLeaseExpired {
		t.Fatalf("job after recovery: attempt %d, errors %+v", j.Attempt, j.Errors)
	}
	if a := c.cmd("ACK", map[string]any{"jid": "lease-1"}); a != "+OK" {
		t.Fatalf("ACK answered %q", a)
	}
}

// TestFaktoryListenRule: off loopback the Faktory listener needs a
// password (the token by default), as the API needs a token.
func TestFaktoryListenRule(t *testing.T) {
	store := memory.New()
	defer store.Close()
	cfg := server.Config{Backend: store, Addr: "127.0.0.1:0", FaktoryAddr: "0.0.0.0:7419"}
	if err := cfg.CheckListen(); err == nil || !strings.Contains(err.Error(), "Faktory") {
		t.Fatalf("no password off loopback: %v", err)
	}
	for _, ok := range []server.Config{
		{Backend: store, Addr: "127.0.0.1:0", FaktoryAddr: "0.0.0.0:7419", Token: "t"},
		{Backend: store, Addr: "127.0.0.1:0", FaktoryAddr: "0.0.0.0:7419", FaktoryPassword: "p"},
		{Backend: store, Addr: "127.0.0.1:0", FaktoryAddr: "0.0.0.0:7419", Insecure: true},
		{Backend: store, Addr: "127.0.0.1:0", FaktoryAddr: "127.0.0.1:7419"},
	} {
		if err := ok.CheckListen(); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
}
