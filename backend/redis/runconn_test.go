package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestRunConns: at most lineCalls connections are lent at once; a broken
// one is not lent again, and its place can be taken by a new one; a
// closed store lends none.
func TestRunConns(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	var lent []*runConn
	for range lineCalls {
		rc := s.runConns.take(s.client)
		if rc == nil {
			t.Fatalf("take %d of %d: none lent", len(lent)+1, lineCalls)
		}
		lent = append(lent, rc)
	}
	if rc := s.runConns.take(s.client); rc != nil {
		t.Fatalf("take %d: lent one more than lineCalls (%d)", lineCalls+1, lineCalls)
	}
	// Each works on its own.
	for i, rc := range lent {
		if err := rc.c.Do(t.Context(), rc.c.B().Ping().Build()).Error(); err != nil {
			t.Fatalf("PING on lent connection %d: %v", i, err)
		}
	}
	broken := lent[0]
	s.runConns.give(broken, true)
	again := s.runConns.take(s.client)
	if again == nil || again == broken {
		t.Fatalf("take after a broken one was given back = %p (the broken one %p); want a new one", again, broken)
	}
	s.runConns.give(again, false)
	if rc := s.runConns.take(s.client); rc != again {
		t.Fatalf("take = %p; want the idle one given back (%p)", rc, again)
	}
	for _, rc := range lent[1:] {
		s.runConns.give(rc, false)
	}
	s.runConns.close()
	if rc := s.runConns.take(s.client); rc != nil {
		t.Fatal("a closed pool lent a connection")
	}
	s.runConns.give(again, false) // given back after close: released, not kept
	if n := len(s.runConns.idle); n != 0 {
		t.Fatalf("%d idle connections after close; want none", n)
	}
}

// TestOwnConnDeadline: a single enqueue on a connection of its own ends
// at its ctx's deadline while the server holds writes back, and the next
// ones, once it lets them through, go through (the timed-out connection
// is replaced).
func TestOwnConnDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	t.Parallel()
	ps := startServer(t)
	s, err := Open(t.Context(), Options{Addrs: []string{ps.addr()}, Prefix: "kyuown", RetryFor: 10 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	job := []backend.NewJob{{Type: "own", Queue: "own", Payload: []byte("x")}}
	if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: job}); err != nil {
		t.Fatalf("Enqueue before the stall: %v", err)
	}

	// Once CLIENT PAUSE has answered, the server holds every write
	// command (the enqueue script's FCALL among them) for 2 s.
	if out, err := ps.cli("CLIENT", "PAUSE", "2000", "WRITE"); err != nil {
		t.Fatalf("CLIENT PAUSE: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: job})
	took := time.Since(start)
	if err == nil {
		t.Fatal("Enqueue during a 2 s pause of writes with a 300 ms deadline succeeded")
	}
	if took > 1500*time.Millisecond {
		t.Fatalf("Enqueue with a 300 ms deadline returned after %v: %v", took, err)
	}
	if !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Enqueue with a 300 ms deadline: %v; want a deadline error", err)
	}
	for i := range 2 * lineCalls {
		if _, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: job}); err != nil {
			t.Fatalf("Enqueue %d after the stall: %v", i, err)
		}
	}
}
