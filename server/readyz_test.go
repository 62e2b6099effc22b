package server_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
)

// TestReadyDamagedStore damages a table of the embedded store under a
// running server, in blocks that only reading a job's payload touches:
// the read fails, the process keeps running (the engine reports the
// damage from inside, which used to end the process), /readyz answers 503
// naming the damage, and /healthz 200.
func TestReadyDamagedStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Payloads that do not compress fill blocks of their own; small ones,
	// since the engine's check of a bad block grows with its size squared.
	rng := rand.New(rand.NewPCG(7, 7))
	payload := make([]byte, 8<<10)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	jobs := make([]backend.NewJob, 16)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Payload: payload}
	}
	res, err := store.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// Reopening writes the log out as a table; the second open reads the
	// job records (not the payloads) to rebuild its indexes.
	for range 2 {
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		if store, err = pebble.Open(dir, pebble.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { store.Close() })
	ssts, err := filepath.Glob(filepath.Join(dir, "data", "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no table files (%v)", err)
	}
	slices.Sort(ssts)
	damage(t, ssts[len(ssts)-1])

	e := newEnvOver(t, store, nil)
	failed := false
	for _, j := range res.Jobs {
		if r := e.req("GET", "/api/v1/jobs/"+j.ID, nil); r.status >= 500 {
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("every job read well over a damaged table")
	}
	r := e.req("GET", "/readyz", nil)
	if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" || !strings.Contains(string(r.body), "damaged") {
		t.Errorf("readyz over a damaged store: %d %s; want 503 naming the damage", r.status, r.body)
	}
	if r := e.req("GET", "/healthz", nil); r.status != http.StatusOK {
		t.Errorf("healthz over a damaged store: %d; want 200 (the process lives)", r.status)
	}
}

// damage zeroes 64 bytes in the middle of a file.
func damage(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 64), st.Size()/2); err != nil {
		t.Fatal(err)
	}
}
