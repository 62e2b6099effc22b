package remote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/backend/remote"
	"github.com/kyuhq/kyu/server"
)

// testClock is the server's test clock. Every call of the suite that
// takes a Now sends it in the Kyu-Now header, which a server with a test
// clock honours; this clock only serves calls without one.
type testClock struct{}

func (testClock) Now() time.Time { return time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC) }

// startServer starts a kyu server over a fresh embedded store on a free
// loopback port and returns its base URL. change adjusts the Config.
func startServer(t testing.TB, change func(*server.Config)) string {
	t.Helper()
	return "http://" + newServer(t, change).Addr().String()
}

// newServer starts a kyu server as startServer does, shut down at cleanup
// unless the test has shut it down before.
func newServer(t testing.TB, change func(*server.Config)) *server.Server {
	t.Helper()
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := server.Config{Backend: store, Addr: "127.0.0.1:0", Token: "remote-test"}
	if change != nil {
		change(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server Shutdown: %v", err)
		}
	})
	return srv
}

// openRemote opens the remote backend for url and closes it with the test.
func openRemote(t testing.TB, url string) *remote.Backend {
	t.Helper()
	b, err := remote.Open(url, remote.Options{Token: "remote-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestConformance runs the conformance suite over HTTP: the remote backend
// against a server (with the suite's clock carried in Kyu-Now, and no
// maintenance loops of its own, since the suite drives maintenance) over
// a fresh embedded store per subtest.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		url := startServer(t, func(c *server.Config) {
			c.Clock = testClock{}
			c.MaintenanceInterval = -1
		})
		return openRemote(t, url)
	})
}

// TestErrorsFromTheServer checks that answers of the server come back as
// the contract's errors, including an operation the server's store does
// not offer yet (the embedded store of this branch lacks WatchFinished):
// ErrNotSupported, not an HTTP status.
func TestErrorsFromTheServer(t *testing.T) {
	t.Parallel()
	b := openRemote(t, startServer(t, nil))
	ctx := t.Context()
	if _, err := b.Get(ctx, backend.GetParams{ID: "no-such-job"}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get of an unknown id: %v; want ErrNotFound", err)
	}
	sub, err := b.WatchFinished(ctx, backend.WatchParams{IDs: []string{"x"}})
	switch {
	case err == nil:
		sub.Close() // the store supports it by now: nothing to check here
	case !errors.Is(err, backend.ErrNotSupported):
		t.Errorf("WatchFinished on a store without it: %v; want ErrNotSupported", err)
	}
	bad, err := remote.Open("http://127.0.0.1:1", remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Get(ctx, backend.GetParams{ID: "x"}); err == nil {
		t.Error("Get from a server that is not there succeeded")
	}
	noTok, err := remote.Open(startServer(t, nil), remote.Options{Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	defer noTok.Close()
	if _, err := noTok.Get(ctx, backend.GetParams{ID: "x"}); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("Get with a wrong token: %v; want unauthorized", err)
	}
}
