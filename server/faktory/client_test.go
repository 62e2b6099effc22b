package faktory_test

import (
	"bufio"
	"context"
	"encoding/json"

	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/server/faktory"
)

// fwp is a small FWP client for the tests: it sends command lines and
// reads RESP answers.
type fwp struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

// answer is one RESP answer: a simple string, an error, or a bulk string
// (nil for $-1).
type answer struct {
	kind byte // '+', '-' or '$'
	text string
	bulk []byte
}

// dial connects and reads the HI greeting.
func dial(t testing.TB, addr string) (*fwp, map[string]any) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &fwp{t: t, nc: nc, r: bufio.NewReader(nc)}
	a := c.read()
	if a.kind != '+' || !strings.HasPrefix(a.text, "HI ") {
		t.Fatalf("greeting %q, want +HI {...}", a.text)
	}
	var hi map[string]any
	if err := json.Unmarshal([]byte(a.text[3:]), &hi); err != nil {
		t.Fatalf("greeting %q: %v", a.text, err)
	}
	return c, hi
}

// hello dials and identifies with the fields given (a pwdhash is added
// for password when the server asks for one).
func hello(t testing.TB, addr, password string, fields map[string]any) *fwp {
	t.Helper()
	c, hi := dial(t, addr)
	if fields == nil {
		fields = map[string]any{}
	}
	fields["v"] = 2
	if s, ok := hi["s"].(string); ok {
		fields["pwdhash"] = faktory.PasswordHash(password, s, int(hi["i"].(float64)))
	}
	if a := c.cmd("HELLO", fields); a.kind != '+' || a.text != "OK" {
		t.Fatalf("HELLO: %+v", a)
	}
	return c
}

// send writes one line.
func (c *fwp) send(line string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write([]byte(line + "\r\n")); err != nil {
		c.t.Fatal(err)
	}
}

// cmd sends a verb with its argument (a string as it is, anything else as
// JSON) and reads the answer.
func (c *fwp) cmd(verb string, arg any) answer {
	c.t.Helper()
	line := verb
	switch a := arg.(type) {
	case nil:
	case string:
		line += " " + a
	default:
		b, err := json.Marshal(a)
		if err != nil {
			c.t.Fatal(err)
		}
		line += " " + string(b)
	}
	c.send(line)
	return c.read()
}

// read reads one answer.
func (c *fwp) read() answer {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		c.t.Fatal("empty answer line")
	}
	a := answer{kind: line[0], text: line[1:]}
	if a.kind != '$' {
		return a
	}
	n, err := strconv.Atoi(a.text)
	if err != nil {
		c.t.Fatalf("bulk length %q", a.text)
	}
	if n < 0 {
		return a
	}
	buf := make([]byte, n+2)
	if _, err := io(c.r, buf); err != nil {
		c.t.Fatalf("read bulk: %v", err)
	}
	a.bulk = buf[:n]
	return a
}

// io reads exactly len(buf) bytes.
func io(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ok fails the test unless a is +OK.
func (a answer) ok(t testing.TB) {
	t.Helper()
	if a.kind != '+' || a.text != "OK" {
		t.Fatalf("answer %c%s %s, want +OK", a.kind, a.text, a.bulk)
	}
}

// job decodes a FETCH answer, failing on nil or an error.
func (a answer) job(t testing.TB) map[string]any {
	t.Helper()
	if a.kind != '$' || a.bulk == nil {
		t.Fatalf("answer %c%s, want a job", a.kind, a.text)
	}
	var j map[string]any
	if err := json.Unmarshal(a.bulk, &j); err != nil {
		t.Fatalf("job %s: %v", a.bulk, err)
	}
	return j
}

// listen starts a Listener over a fresh memory store on a free port.
func listen(t testing.TB, change func(*faktory.Config)) (*faktory.Listener, backend.Backend) {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	cfg := faktory.Config{Backend: store, Addr: "127.0.0.1:0", FetchWait: 300 * time.Millisecond}
	if change != nil {
		change(&cfg)
	}
	l, err := faktory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return l, store
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jobJSON is a Faktory job for PUSH.
func jobJSON(jid, jobtype string, extra map[string]any) map[string]any {
	j := map[string]any{"jid": jid, "jobtype": jobtype, "args": []any{1, "two"}}
	for k, v := range extra {
		j[k] = v
	}
	return j
}
