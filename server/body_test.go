package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// rawConn dials the env's server over plain TCP, with a deadline on the
// whole exchange so that a server that never answers fails the test.
func rawConn(t *testing.T, e *env) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c.(*net.TCPConn)
}

// head is the head of a POST of a job, without the body length headers.
func head(e *env) string {
	return "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + e.token + "\r\nContent-Type: application/json\r\n"
}

// readAnswer reads one answer from c; an error means the connection
// closed or timed out first.
func readAnswer(c net.Conn) (*http.Response, string, error) {
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// levels records the levels of the records logged through it.
type levels struct {
	mu   sync.Mutex
	seen []string
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.Level.String()+" "+r.Message)
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// atLeast lists the records logged at level or above.
func (l *levels) atLeast(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.seen {
		var lv slog.Level
		if lv.UnmarshalText([]byte(strings.Fields(s)[0])) == nil && lv >= level {
			out = append(out, s)
		}
	}
	return out
}

// TestBrokenBodyIs400 sends bodies that break off or are malformed: each
// is the client's fault, a 400, and no error in the server's log.
func TestBrokenBodyIs400(t *testing.T) {
	t.Parallel()
	logged := &levels{}
	e := newEnv(t, func(c *server.Config) { c.Logger = slog.New(logged) })
	for _, c := range []struct {
		name, rest string
		halfClose  bool
	}{
		{"malformed chunked encoding", "Transfer-Encoding: chunked\r\n\r\nzz\r\n{\"type\"\r\n0\r\n\r\n", false},
		{"chunk cut short", "Transfer-Encoding: chunked\r\n\r\n40\r\n{\"type\":\"t\"}", true},
		{"body shorter than its Content-Length", "Content-Length: 100\r\n\r\n{\"type\":\"t\"", true},
	} {
		conn := rawConn(t, e)
		if _, err := io.WriteString(conn, head(e)+c.rest); err != nil {
			t.Fatal(err)
		}
		if c.halfClose {
			conn.CloseWrite()
		}
		resp, body, err := readAnswer(conn)
		if err != nil {
			t.Fatalf("%s: no answer: %v", c.name, err)
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) {
			t.Errorf("%s: %d %s; want 400 invalid_argument", c.name, resp.StatusCode, body)
		}
	}
	if errs := logged.atLeast(slog.LevelError); len(errs) > 0 {
		t.Errorf("the server logged errors for the clients' broken bodies: %q", errs)
	}
}

// TestStalledBodyTimesOut sends the headers and part of a body, then
// stalls: the server must give up on the body (408, connection closed)
// instead of holding the connection.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.BodyTimeout = 200 * time.Millisecond })
	conn := rawConn(t, e)
	if _, err := io.WriteString(conn, head(e)+"Content-Length: 1000\r\n\r\n{\"type\":\"t"); err != nil {
		t.Fatal(err)
	}
	resp, body, err := readAnswer(conn)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v; want 408 and the connection closed", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"request_timeout"`) {
		t.Errorf("stalled body: %d %s; want 408 request_timeout", resp.StatusCode, body)
	}
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the 408, read %d bytes, %v; want the connection closed (EOF)", n, err)
	}
}

// TestBodyTimeoutSparesLongPolls checks that the body deadline ends with
// the body: a claim that waits past it still gets a job enqueued later.
func TestBodyTimeoutSparesLongPolls(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 100 * time.Millisecond
	e := newEnv(t, func(c *server.Config) { c.BodyTimeout = bodyTimeout })
	got := make(chan reply, 1)
	go func() {
		got <- e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"slow"}, "max": 1, "lease": "30s", "wait": "20s", "worker": "test"})
	}()
	// Past the body deadline (not a guess at ordering: an early enqueue
	// would only make the test weaker).
	time.Sleep(3 * bodyTimeout)
	id := e.enqueue(map[string]any{"type": "t", "queue": "slow"})
	r := <-got
	if r.status != http.StatusOK || !strings.Contains(string(r.body), id) {
		t.Fatalf("claim waiting past the body timeout: %d %s; want job %s", r.status, r.body, id)
	}
}

// TestConnectionsAreCapped holds MaxConns connections open: the next one
// is served only once one of them closes.
func TestConnectionsAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxConns = 2 })
	e.hc.CloseIdleConnections() // newEnv's own; its slot frees when the server sees it close
	const get = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	var held []net.Conn
	for range 2 {
		c := rawConn(t, e)
		io.WriteString(c, get)
		if _, _, err := readAnswer(c); err != nil {
			t.Fatalf("connection within the cap: %v", err)
		}
		held = append(held, c)
	}
	third := rawConn(t, e)
	io.WriteString(third, get)
	answered := make(chan error, 1)
	go func() {
		_, _, err := readAnswer(third)
		answered <- err
	}()
	// A server past its cap answers nothing; a wait that ends early under
	// load only makes this check weaker, never wrong.
	select {
	case err := <-answered:
		t.Fatalf("a connection past the cap of 2 was served (%v); want it held until one closes", err)
	case <-time.After(300 * time.Millisecond):
	}
	held[0].Close()
	if err := <-answered; err != nil {
		t.Fatalf("after a held connection closed, the waiting one got %v; want an answer", err)
	}
}
