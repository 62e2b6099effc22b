package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerCommand starts `kyu server` on a free port, reads the address
// it prints, gets /healthz and stops it as a signal would.
func TestServerCommand(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	store := filepath.Join(t.TempDir(), "store")
	go func() {
		err := Run(ctx, []string{"server", "--addr", "127.0.0.1:0", "--backend", "pebble://" + store}, pw, io.Discard)
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
	base, _, _ := strings.Cut(rest, " ")
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("GET /healthz: %d %s", resp.StatusCode, body)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kyu server after the signal: %v; want a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kyu server did not stop within 30s of the signal")
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
