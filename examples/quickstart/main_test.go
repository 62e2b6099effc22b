package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend/pebble"
)

// TestQuickstartBesideServer runs the example while another process holds
// kyu server's default store, ./kyu-data, open: the README runs both side
// by side, so the example must keep to its own directory.
func TestQuickstartBesideServer(t *testing.T) {
	t.Chdir(t.TempDir())
	server, err := pebble.Open("kyu-data", pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &lineWatch{want: "sending", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- run(ctx, dataDir, out) }()

	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("quickstart ended before it processed its job: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("quickstart did not process its job within a minute")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("quickstart after Ctrl-C: %v", err)
	}
}

// lineWatch is an io.Writer that closes seen once the output contains want.
type lineWatch struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}
