package pebble

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// These tests cover what the conformance suite cannot see of JIDs: the
// record encoding, the keys that hold them, and how they survive a
// restart, an older store and damage.

func encodeJobV2(j *backend.Job, sd side) []byte {
	return appendJobV2([]byte{recordVersionV2}, j, sd)
}

func TestEncodingJID(t *testing.T) {
	j := withNewFields(fullJob())
	j.JID = "faktory-jid"
	sd := side{payload: true, logs: 2}
	got, gotSide, err := decodeJob(encodeJob(nil, j, sd))
	if err != nil || gotSide != sd || !reflect.DeepEqual(got, j) {
		t.Fatalf("round trip = %+v, %+v, %v\nwant %+v", got, gotSide, err, j)
	}
	// A version 2 record has no JID and decodes as it was written.
	old := withNewFields(fullJob())
	got, gotSide, err = decodeJob(encodeJobV2(old, sd))
	if err != nil || gotSide != sd || !reflect.DeepEqual(got, old) {
		t.Fatalf("version 2 record = %+v, %+v, %v\nwant %+v", got, gotSide, err, old)
	}
	// The version 2 layout ends before the JID.
	if _, _, err := decodeJob(appendString(encodeJobV2(old, sd), "x")); err == nil {
		t.Fatal("a version 2 record followed by a JID decoded")
	}
}

// TestJIDKeys checks that the JID key exists exactly while its job does,
// and that a JID holds after a restart.
func TestJIDKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	id := enqueue(t, s, t0, backend.NewJob{JID: "a"}, backend.NewJob{})[0].ID
	if n := countKeys(t, s, prefixJID); n != 1 {
		t.Fatalf("%d JID keys after enqueueing one job with a JID; want 1", n)
	}
	s = reopen(t, s, dir)
	if r := enqueue(t, s, t0, backend.NewJob{JID: "a", Queue: "other"})[0]; !r.Duplicate || r.ID != id {
		t.Fatalf("enqueue of a held JID after reopen = %+v; want a duplicate of %s", r, id)
	}
	if j, err := s.Get(ctx, backend.GetParams{JID: "a"}); err != nil || j.ID != id {
		t.Fatalf("Get by JID after reopen = %v, %v; want %s", j, err, id)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, prefixJID); n != 0 {
		t.Fatalf("%d JID keys after deleting the job; want 0", n)
	}
	s = reopen(t, s, dir)
	if _, err := s.Get(ctx, backend.GetParams{JID: "a"}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get by the JID of a deleted job after reopen = %v; want ErrNotFound", err)
	}
}

// TestFormat2StoreIsUpgraded opens a store as format 2 code left it (a
// version 2 record): the job is read without a JID and the store is
// marked format 3.
func TestFormat2StoreIsUpgraded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	id := enqueue(t, s, t0, backend.NewJob{Queue: "old", Title: "v2"})[0].ID
	if err := s.db.Set(jobKey(mustParse(t, id)), encodeJobV2(get(t, s, id), side{}), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkerVersion(dir, 2); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	if v, err := readMarker(vfsDefault(), dir); err != nil || v != formatVersion {
		t.Fatalf("marker after opening a format 2 store = %d, %v; want %d", v, err, formatVersion)
	}
	if j := get(t, s, id); j.Title != "v2" || j.JID != "" {
		t.Fatalf("version 2 record read as title %q, jid %q", j.Title, j.JID)
	}
	if r := enqueue(t, s, t0, backend.NewJob{JID: "new"})[0]; r.Duplicate {
		t.Fatalf("enqueue with a JID in an upgraded store = %+v", r)
	}
}

// TestOpenRewritesDamagedJIDKeys removes one job's JID key and adds one
// naming no job, as damage could, and checks that Open writes the keys
// afresh from the records.
func TestOpenRewritesDamagedJIDKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	ids := enqueue(t, s, t0, backend.NewJob{JID: "lost"}, backend.NewJob{JID: "kept"})
	ghost := enqueue(t, s, t0, backend.NewJob{JID: "ghost"})[0].ID
	if err := s.db.Delete(jidKey("lost"), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	// The key of ghost's JID outlives its job, and one more names nothing.
	if err := s.db.Delete(jobKey(mustParse(t, ghost)), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(jidKey("stray"), make([]byte, 16), cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	if n := countKeys(t, s, prefixJID); n != 2 {
		t.Fatalf("%d JID keys after reopen; want 2 (lost and kept)", n)
	}
	for i, jid := range []string{"lost", "kept"} {
		if r := enqueue(t, s, t0.Add(time.Second), backend.NewJob{JID: jid})[0]; !r.Duplicate || r.ID != ids[i].ID {
			t.Fatalf("enqueue with JID %q after reopen = %+v; want a duplicate of %s", jid, r, ids[i].ID)
		}
	}
	for _, jid := range []string{"ghost", "stray"} {
		if _, err := s.Get(ctx, backend.GetParams{JID: jid}); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get by JID %q after reopen = %v; want ErrNotFound", jid, err)
		}
	}
}
