package pebble

import (
	"fmt"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/kyuhq/kyu/backend"
)

// TestOlderPayloadsAreMoved leaves the payloads of some jobs under 'p' +
// id, where format 3 kept them, in a store marked format 3 (as that code
// left it) or format 4 (a move a crash cut short), and checks that Open
// moves them under 'x' + id and that reads and claims see them.
func TestOlderPayloadsAreMoved(t *testing.T) {
	t.Parallel()
	for _, marked := range []int{3, formatVersion} {
		t.Run(fmt.Sprintf("format%d", marked), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore(t, dir, Options{})
			payloads := []string{"one", "", "three", "four"}
			jobs := make([]backend.NewJob, len(payloads))
			for i, p := range payloads {
				jobs[i] = backend.NewJob{Payload: []byte(p)}
			}
			enq := enqueue(t, s, t0, jobs...)
			// Move all but the last payload back where format 3 kept them
			// (the empty one has a key too).
			b := s.db.NewBatch()
			for _, e := range enq[:len(enq)-1] {
				id := mustParse(t, e.ID)
				v, closer, err := s.db.Get(payloadKey(id))
				if err != nil {
					t.Fatal(err)
				}
				_ = b.Set(append([]byte{prefixPayloadV3}, id[:]...), v, nil)
				_ = closer.Close()
				_ = b.Delete(payloadKey(id), nil)
			}
			if err := b.Commit(cpebble.Sync); err != nil {
				t.Fatal(err)
			}
			if n := countKeys(t, s, prefixPayloadV3); n != 3 {
				t.Fatalf("%d payloads under 'p' before the reopen; want 3", n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := writeMarkerVersion(dir, marked); err != nil {
				t.Fatal(err)
			}

			s = openStore(t, dir, Options{})
			if v, err := readMarker(vfsDefault(), dir); err != nil || v != formatVersion {
				t.Fatalf("marker after the reopen = %d, %v; want %d", v, err, formatVersion)
			}
			if n := countKeys(t, s, prefixPayloadV3); n != 0 {
				t.Fatalf("%d payloads left under 'p'; want 0", n)
			}
			if n := countKeys(t, s, prefixPayload); n != 4 {
				t.Fatalf("%d payloads under 'x'; want 4", n)
			}
			for i, e := range enq {
				if got := get(t, s, e.ID).Payload; string(got) != payloads[i] {
					t.Errorf("Get(%s).Payload = %q; want %q", e.ID, got, payloads[i])
				}
			}
			for _, j := range claim(t, s, t0, len(enq)) {
				for i, e := range enq {
					if e.ID == j.ID && string(j.Payload) != payloads[i] {
						t.Errorf("claimed %s with payload %q; want %q", j.ID, j.Payload, payloads[i])
					}
				}
			}
		})
	}
}
