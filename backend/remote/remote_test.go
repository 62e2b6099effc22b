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
	"github.com/kyuhq/kyu/server/api"
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

// TestLimitsOverHTTP: the limits reach a Go caller over HTTP as clear
// errors: a too-long title is a *ValidationError naming the field, as
// with an embedded store; a batch over the server's MaxBatch is the
// server's payload_too_large. A claim the server stops early at its byte
// bound is claimed again for the rest, each job once.
func TestLimitsOverHTTP(t *testing.T) {
	t.Parallel()
	b := openRemote(t, startServer(t, func(c *server.Config) { c.MaxBatch = 3; c.MaxResponseBytes = 4000 }))
	ctx := t.Context()
	now := time.Now()
	_, err := b.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Title: strings.Repeat("x", backend.MaxTitle+1)}}})
	var ve *backend.ValidationError
	if !errors.As(err, &ve) || ve.Field != "title" {
		t.Fatalf("enqueue of a title over %d bytes: %v; want a *ValidationError on title", backend.MaxTitle, err)
	}
	four := make([]backend.NewJob, 4)
	for i := range four {
		four[i] = backend.NewJob{Type: "t", Queue: "over"}
	}
	_, err = b.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: four})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeTooLarge || !strings.Contains(err.Error(), "at most 3 jobs") {
		t.Fatalf("enqueue of 4 jobs over a batch limit of 3: %v; want payload_too_large saying the limit", err)
	}
	var jobs []backend.NewJob
	for range 3 {
		jobs = append(jobs, backend.NewJob{Type: "t", Queue: "big", Payload: []byte(`"` + strings.Repeat("y", 1000) + `"`)})
	}
	for range 2 {
		if _, err := b.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.Claim(ctx, backend.ClaimParams{Queues: []string{"big"}, Max: 6, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, j := range res.Jobs {
		if seen[j.ID] || j.State != backend.StateActive {
			t.Fatalf("job %s handed out twice or not active (%s)", j.ID, j.State)
		}
		seen[j.ID] = true
	}
	if len(seen) != 6 {
		t.Fatalf("a claim of 6 jobs of 1000 bytes under a bound of 4000 bytes got %d; want all 6 over several answers", len(seen))
	}
}
