package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestPayloadReaderSeesImports deletes a pending job and imports it again,
// same id, with another payload, while the claims' payload iterator, which
// read the first payload, stays open: the claim of the imported job gets
// the imported payload.
func TestPayloadReaderSeesImports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	s.payloads.maxAge = time.Hour
	enq := enqueue(t, s, t0, backend.NewJob{Payload: []byte("first")}, backend.NewJob{Payload: []byte("old")})
	// The enqueued payloads are in memory until the section ends; from a
	// reopen on they are read from Pebble.
	if got := claim(t, s, t0, 1); len(got) != 1 || string(got[0].Payload) != "first" {
		t.Fatalf("first claim = %+v", got)
	}
	s.payloads.mu.Lock()
	open := s.payloads.r.it != nil
	s.payloads.mu.Unlock()
	if !open {
		t.Skip("the claim read no payload from Pebble (it had it in memory)")
	}
	old := get(t, s, enq[1].ID)
	if err := s.Delete(ctx, backend.DeleteParams{ID: old.ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	old.Payload = []byte("imported")
	res, err := s.Import(ctx, backend.ImportParams{Jobs: []*backend.Job{old}, Now: t0})
	if err != nil || res.Items[0].Outcome != backend.ImportCreated {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	if got := claim(t, s, t0, 1); len(got) != 1 || string(got[0].Payload) != "imported" {
		t.Fatalf("claim of the imported job = %+v; want its payload \"imported\"", got)
	}
}

// TestPayloadReaderClosesWhenIdle checks that the claims' payload iterator
// is closed once it is maxAge old, with no claim after it.
func TestPayloadReaderClosesWhenIdle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	enqueue(t, s, t0, backend.NewJob{Payload: []byte("p")})
	s = reopen(t, s, dir) // the payload is read from Pebble, not memory
	s.payloads.maxAge = 10 * time.Millisecond
	if got := claim(t, s, t0, 1); len(got) != 1 || string(got[0].Payload) != "p" {
		t.Fatalf("claim = %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.payloads.mu.Lock()
		open := s.payloads.r.it != nil
		s.payloads.mu.Unlock()
		if !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the payload iterator is still open 10 s after the claim")
		}
		time.Sleep(time.Millisecond)
	}
}
