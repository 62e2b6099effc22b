package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
}
