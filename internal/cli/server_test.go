package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServerCommand starts `kyu server` on a free port, reads the address
// it prints, gets /healthz and stops it as a signal would.
func TestServerCommand(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("GET /healthz: %d %s", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServerMemoryStore serves an in-memory store (kyu server --backend
// memory://): an enqueued job can be listed through the server.
func TestServerMemoryStore(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t, "--backend", "memory://")
	id, _, err := run(t, "enqueue", "demo.job", "--backend", base)
	if err != nil {
		t.Fatalf("kyu enqueue: %v", err)
	}
	out, _, err := run(t, "jobs", "list", "--backend", base)
	if err != nil {
		t.Fatalf("kyu jobs list: %v", err)
	}
	if id = strings.TrimSpace(id); id == "" || !strings.Contains(out, id) {
		t.Fatalf("kyu jobs list does not show the enqueued job %q:\n%s", id, out)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServerTokenFile checks that --token-file gives the token, and that
// it cannot be given with --token as well.
func TestServerTokenFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := serveCLI(t, "--token-file", file)
	for auth, want := range map[string]int{"": 401, "Bearer from-the-file": 200} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1/queues", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/v1/queues with %q: %d; want %d", auth, resp.StatusCode, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "server", "--addr", "127.0.0.1:0", "--backend", "pebble://"+filepath.Join(t.TempDir(), "s2"), "--token", "x", "--token-file", file)
	var usage *UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("--token with --token-file = %v; want a usage error", err)
	}
}

// serveCLI starts `kyu server` with args on a free port over a fresh
// store and returns its base URL and a stop that signals it and waits.
func serveCLI(t *testing.T, args ...string) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	store := filepath.Join(t.TempDir(), "store")
	go func() {
		err := Run(ctx, append([]string{"server", "--addr", "127.0.0.1:0", "--backend", "pebble://" + store}, args...), pw, io.Discard)
		pw.Close()
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (Run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "listening on ")
	if !ok {
		t.Fatalf("printed %q; want the address it listens on", line)
	}
	base, _, _ = strings.Cut(rest, " ")
	return base, func() error {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("kyu server after the signal: %w; want a clean stop", err)
			}
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("kyu server did not stop within 30s of the signal")
		}
	}
}

// TestServerRefusesOpenAddress checks that a non-loopback address without
// a token is refused with a reason, before anything listens. (No
// t.Parallel: it clears KYU_TOKEN.)
func TestServerRefusesOpenAddress(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	t.Setenv(tokenEnv, "")
	_, _, err := run(t, "server", "--addr", "0.0.0.0:0", "--backend", store)
	var usage *UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "without a token") {
		t.Fatalf("kyu server --addr 0.0.0.0:0 = %v; want a usage error saying a token is needed", err)
	}
	if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused server left its store directory: stat %s: %v; want none", store, err)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServerOnTerminal checks what `kyu server` says on a terminal: the
// API URL and how to stop it; and that it logs the embedded store's
// absolute directory and "stopped" at the end. (No t.Parallel: it
// changes the working directory.)
func TestServerOnTerminal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	done := make(chan error, 1)
	f := serverFlags{addr: "127.0.0.1:0", backendURL: "pebble://rel-store", memoryLimit: "off", bodyTimeout: time.Minute, terminal: true}
	go func() {
		err := runServer(ctx, f, pw, &stderr)
		pw.Close()
		done <- err
	}()
	out := bufio.NewReader(pr)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (runServer: %v)", err, <-done)
	}
	// The rest is printed before the server waits for its signal.
	cancel()
	rest, _ := io.ReadAll(out)
	if err := <-done; err != nil {
		t.Fatalf("runServer after the signal: %v", err)
	}
	_, after, _ := strings.Cut(first, "listening on ")
	base, _, _ := strings.Cut(after, " ")
	if want := "Dashboard: " + base + "/\nREST API: " + base + "/api/v1 (OpenAPI document at " + base + "/api/v1/openapi.json)\nPress Ctrl+C to stop.\n"; string(rest) != want {
		t.Errorf("printed after the address %q; want %q", rest, want)
	}
	logs := stderr.String()
	storeDir := filepath.Join(dir, "rel-store")
	if want := `msg="kyu server embedded store" dir=` + storeDir; !strings.Contains(logs, want) {
		t.Errorf("logs %q; want %q", logs, want)
	}
	if !strings.HasSuffix(logs, "msg=\"kyu server stopped\"\n") {
		t.Errorf("logs %q; want them to end with kyu server stopped", logs)
	}
}

// TestServerBasePathAndReadOnly checks that --base-path serves the
// dashboard and the API under the prefix, and that --read-only refuses an
// enqueue with 403 while the pages still answer.
func TestServerBasePathAndReadOnly(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t, "--base-path", "/kyu", "--read-only", "--token", "")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get(base + "/kyu/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `data-base="/kyu"`) || !strings.Contains(string(page), `data-readonly="true"`) {
		t.Fatalf("GET /kyu/ = %d %.300q; want the overview page under /kyu, read-only", resp.StatusCode, page)
	}
	resp, err = http.Post(base+"/kyu/api/v1/jobs", "application/json", strings.NewReader(`{"type":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("enqueue on a read-only server = %d; want 403", resp.StatusCode)
	}
	resp, err = http.Get(base + "/api/v1/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /api/v1/queues outside the base path = %d; want 404", resp.StatusCode)
	}
}
