package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

func TestOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openStore(t, dir, Options{})
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v; want ErrLocked", err)
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Fatalf("lock error %q does not name the holder (%q)", err, want)
	}
	if host, _ := os.Hostname(); !strings.Contains(err.Error(), host) {
		t.Fatalf("lock error %q does not name the host %q", err, host)
	}
}

func TestOpenAfterClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, s, t0, backend.NewJob{})[0].ID
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("second Close = %v; want ErrClosed", err)
	}
	s2 := openStore(t, dir, Options{})
	get(t, s2, id)
}

func TestOpenForeignDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("Open of a foreign directory = %v; want ErrNotStore naming what is there", err)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("Open changed a foreign directory: it now holds %v", names)
	}
}

// TestOpenAfterCrashedCreate opens a directory that an Open crashed in
// while creating the store: it holds the lock file and a half-written
// temporary marker. The store is created there; the stale file is gone.
func TestOpenAfterCrashedCreate(t *testing.T) {
	t.Parallel()
	for _, leftover := range [][]string{{markerTemp}, {lockFile, markerTemp}} {
		dir := t.TempDir()
		for _, name := range leftover {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("kyu st"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open with %v left over = %v; want a new store", leftover, err)
		}
		id := enqueue(t, s, t0, backend.NewJob{})[0].ID
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, markerTemp)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there after Open: %v", markerTemp, err)
		}
		if v, err := readMarker(vfs.Default, dir); err != nil || v != formatVersion {
			t.Fatalf("marker after Open = %d, %v; want format %d", v, err, formatVersion)
		}
		get(t, openStore(t, dir, Options{}), id)
	}

	// A temporary marker beside a foreign file is still refused, and left.
	dir := t.TempDir()
	for _, name := range []string{markerTemp, "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open of a foreign directory holding %s = %v; want ErrNotStore", markerTemp, err)
	}
	if _, err := os.Stat(filepath.Join(dir, markerTemp)); err != nil {
		t.Fatalf("Open removed a file from a foreign directory: %v", err)
	}
}

func TestOpenNewerFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	_ = s.Close()
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte("kyu store\nformat 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), fmt.Sprint(formatVersion)) {
		t.Fatalf("Open of a newer format = %v; want ErrNewerFormat naming both versions", err)
	}
}

func TestOpenDamagedMarker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte("\x00\x01garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open with a damaged marker = %v; want ErrNotStore", err)
	}
}

func TestOpenCorruptFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	enqueue(t, s, t0, backend.NewJob{Payload: []byte("x")})
	_ = s.Close()
	data := filepath.Join(dir, dataDir)
	entries, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" || e.IsDir() {
			continue
		}
		garbage := []byte(strings.Repeat("not a pebble file\n", 64))
		if err := os.WriteFile(filepath.Join(data, e.Name()), garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open over garbage data files = %v; want ErrCorrupt", err)
	}
}

func TestOpenCorruptRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	enqueue(t, s, t0, backend.NewJob{})
	_ = s.Close()
	// Write a garbage record with the engine directly.
	db, err := cpebble.Open(filepath.Join(dir, dataDir), &cpebble.Options{Logger: pebbleLogger{l: slog.New(slog.DiscardHandler), fault: newEngineFault(slog.New(slog.DiscardHandler))}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(jobKey(jobID{1}), []byte{recordVersion, 0xff}, cpebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), jobID{1}.String()) {
		t.Fatalf("Open over a garbage record = %v; want ErrCorrupt naming the job", err)
	}
	// The lock was released on the failed open.
	if _, err := Open(dir, Options{}); errors.Is(err, ErrLocked) {
		t.Fatalf("a failed Open kept the lock: %v", err)
	}
}

// TestReopenRebuildsIndexes leaves jobs in every kind of index, reopens the
// store and checks that each index came back.
func TestReopenRebuildsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, t0,
		backend.NewJob{Title: "a", Payload: []byte("pa")},
		backend.NewJob{Title: "b", Priority: 5},
		backend.NewJob{Title: "c", Payload: []byte{}},
	)
	scheduled := enqueue(t, s, t0, backend.NewJob{Queue: "later", RunAt: t0.Add(time.Hour)})[0].ID
	deadline := enqueue(t, s, t0, backend.NewJob{Queue: "dl", RunAt: t0.Add(time.Hour), Deadline: t0.Add(2 * time.Hour)})[0].ID
	held := enqueue(t, s, t0, backend.NewJob{Queue: "u", UniqueKey: "k", UniqueFor: time.Hour})[0].ID
	if err := s.Delete(ctx, backend.DeleteParams{ID: held, Now: t0}); err != nil {
		t.Fatal(err)
	}
	heldFinal := enqueue(t, s, t0, backend.NewJob{Queue: "u", UniqueKey: "k2"})[0].ID
	active := enqueue(t, s, t0, backend.NewJob{Queue: "w"})[0].ID
	if got := claim(t, s, t0, 1, "w"); len(got) != 1 || got[0].ID != active {
		t.Fatalf("claim of w = %v", got)
	}
	done := enqueue(t, s, t0, backend.NewJob{Queue: "d", Retention: backend.RetainFor(time.Hour)})[0].ID
	cj := claim(t, s, t0, 1, "d")
	if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(cj[0]), Result: []byte("ok")}}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	got := claim(t, s, t0, 10)
	var titles []string
	for _, j := range got {
		titles = append(titles, j.Title)
	}
	if !slices.Equal(titles, []string{"b", "a", "c"}) {
		t.Fatalf("claim order after reopen = %v; want [b a c]", titles)
	}
	if string(got[1].Payload) != "pa" || got[0].Payload != nil || got[2].Payload == nil {
		t.Fatalf("payloads after reopen = %q, %q, %q", got[0].Payload, got[1].Payload, got[2].Payload)
	}

	dup := enqueue(t, s, t0.Add(30*time.Minute), backend.NewJob{Queue: "u", UniqueKey: "k"})[0]
	if !dup.Duplicate || dup.ID != held {
		t.Fatalf("unique key of a deleted holder after reopen: %+v; want duplicate of %s", dup, held)
	}
	dup = enqueue(t, s, t0.Add(30*time.Minute), backend.NewJob{Queue: "u", UniqueKey: "k2"})[0]
	if !dup.Duplicate || dup.ID != heldFinal || dup.State != backend.StatePending {
		t.Fatalf("unique key of a pending holder after reopen: %+v; want duplicate of %s, pending", dup, heldFinal)
	}

	res, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: t0.Add(time.Minute)})
	if err != nil || res.Moved != 4 {
		t.Fatalf("RecoverLeases after reopen = %+v, %v; want Moved 4 (w's job and the three just claimed)", res, err)
	}
	if j := get(t, s, active); j.State != backend.StatePending {
		t.Fatalf("recovered job is %s", j.State)
	}
	res, err = s.Promote(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)})
	if err != nil || res.Moved != 2 {
		t.Fatalf("Promote after reopen = %+v, %v; want Moved 2", res, err)
	}
	if j := get(t, s, scheduled); j.State != backend.StatePending {
		t.Fatalf("promoted job is %s", j.State)
	}
	res, err = s.Promote(ctx, backend.MaintenanceParams{Now: t0.Add(2 * time.Hour)})
	if err != nil || res.Cancelled != 1 {
		t.Fatalf("Promote at the deadline after reopen = %+v, %v; want Cancelled 1", res, err)
	}
	if j := get(t, s, deadline); j.State != backend.StateCancelled {
		t.Fatalf("job past its deadline is %s", j.State)
	}
	if j := get(t, s, done); j.State != backend.StateCompleted || string(j.Result) != "ok" {
		t.Fatalf("completed job after reopen: %s %q", j.State, j.Result)
	}
	res, err = s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)})
	if err != nil || res.Moved != 1 {
		t.Fatalf("ApplyRetention after reopen = %+v, %v; want Moved 1", res, err)
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: done}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get of a pruned job = %v; want ErrNotFound", err)
	}
	// The UniqueFor period of the deleted holder ends; the key is free.
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r := enqueue(t, s, t0.Add(time.Hour), backend.NewJob{Queue: "u", UniqueKey: "k"})[0]; r.Duplicate {
		t.Fatalf("unique key still held after its period: %+v", r)
	}
}

// A retention that ends past the range of times never deletes the job
// (its deletion time must not wrap around to the past).
func TestRetentionPastTimeRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	now := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	id := enqueue(t, s, now, backend.NewJob{Retention: backend.RetainFor(200 * 365 * 24 * time.Hour)})[0].ID
	j := claim(t, s, now, 1)[0]
	if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leaseOf(j)}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if m, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: backend.MaxTime().Add(-time.Second)}); err != nil || m.Moved != 0 {
			t.Fatalf("ApplyRetention = %+v, %v; want nothing deleted", m, err)
		}
		get(t, s, id)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(openStore(t, dir, Options{}))
}

// TestGroupCommit checks that concurrent writers share commits.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	const writers, each = 16, 20
	errs := make(chan error, writers)
	for range writers {
		go func() {
			for range each {
				_, err := s.Enqueue(context.Background(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: t0})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := claim(t, s, t0, writers*each+1); len(got) != writers*each {
		t.Fatalf("claimed %d of %d jobs", len(got), writers*each)
	}
}

func TestOpenLockedMemFS(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	openStore(t, "/kyu", Options{FS: fs})
	_, err := Open("/kyu", Options{FS: fs})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Open on one MemFS = %v; want ErrLocked naming pid %d", err, os.Getpid())
	}
}

func TestOpenNotADirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("Open of a regular file succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "x" {
		t.Fatalf("Open changed the file to %q", b)
	}
}
