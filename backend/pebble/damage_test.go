package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// newestTable returns the path of the store's newest table file.
func newestTable(t *testing.T, dir string) string {
	t.Helper()
	ssts, err := filepath.Glob(filepath.Join(dir, dataDir, "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no table files in %s (%v)", dir, err)
	}
	slices.Sort(ssts) // the names are zero-padded file numbers
	return ssts[len(ssts)-1]
}

// overwrite replaces n bytes of the file at off (from the end when off is
// negative) with zeros.
func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		off += st.Size()
	}
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

// TestOpenDamagedTable damages the footer of a table file and checks that
// Open refuses the store with ErrCorrupt, naming the file, instead of
// crashing the process: both for a table of job records, which the index
// rebuild reads, and for one of payloads alone, which only Pebble's own
// table statistics open.
func TestOpenDamagedTable(t *testing.T) {
	t.Parallel()
	for _, payloadsOnly := range []bool{false, true} {
		dir := t.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			enqueue(t, s, t0, backend.NewJob{Payload: []byte("payload")})
		}
		if payloadsOnly {
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Set(payloadKey(jobID{1}), []byte("orphan"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		sst := newestTable(t, dir)
		overwrite(t, sst, -40, 40)

		_, err = Open(dir, Options{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(sst)) {
			t.Fatalf("payloads only %v: Open with a damaged table footer = %v; want ErrCorrupt naming %s", payloadsOnly, err, filepath.Base(sst))
		}
		// The failed open released the directory.
		if _, err := Open(dir, Options{}); errors.Is(err, ErrLocked) {
			t.Fatalf("a failed Open kept the lock: %v", err)
		}
	}
}

// TestDamagedTableWhileOpen damages a table while the store is open, in
// blocks that only a later read touches, and checks that the read fails
// and the store is broken from then on (so /readyz, which reads, fails)
// instead of crashing the process.
func TestDamagedTableWhileOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Payloads that do not compress fill their own blocks, apart from the
	// job records that the rebuild at open reads. (Small ones: on a bad
	// checksum Pebble looks for a flipped bit, a cost that grows with the
	// square of the block's size.)
	rng := rand.New(rand.NewPCG(7, 7))
	payload := make([]byte, 8<<10)
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	var ids []string
	for range 16 {
		ids = append(ids, enqueue(t, s, t0, backend.NewJob{Payload: payload})[0].ID)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	sst := newestTable(t, dir)
	st, err := os.Stat(sst)
	if err != nil {
		t.Fatal(err)
	}
	// The payloads are the bulk of the file: damage its middle.
	overwrite(t, sst, st.Size()/2, 64)

	var readErr error
	for _, id := range ids {
		if _, readErr = s.Get(ctx, backend.GetParams{ID: id}); readErr != nil {
			break
		}
	}
	if readErr == nil {
		t.Fatal("every Get succeeded over a damaged table")
	}
	// Every later operation fails, the readiness probe's read included.
	_, err = s.Get(ctx, backend.GetParams{ID: "00000000-0000-0000-0000-000000000000"})
	if err == nil || errors.Is(err, backend.ErrNotFound) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get after the damage was found = %v; want the store's failure (ErrCorrupt)", err)
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: t0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Enqueue on a broken store = %v; want ErrCorrupt", err)
	}
}

// failingSyncFS fails the syncs of Pebble's write-ahead log once armed.
type failingSyncFS struct {
	vfs.FS
	armed atomic.Bool
}

func (f *failingSyncFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return failingSyncFile{File: file, fs: f}, nil
}

func (f *failingSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *failingSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

type failingSyncFile struct {
	vfs.File
	fs *failingSyncFS
}

var errSyncFailed = errors.New("injected sync failure")

func (f failingSyncFile) Sync() error {
	if f.fs.armed.Load() {
		return errSyncFailed
	}
	return f.File.Sync()
}

func (f failingSyncFile) SyncData() error {
	if f.fs.armed.Load() {
		return errSyncFailed
	}
	return f.File.SyncData()
}

func (f failingSyncFile) SyncTo(length int64) (bool, error) {
	if f.fs.armed.Load() {
		return false, errSyncFailed
	}
	return f.File.SyncTo(length)
}

// TestFailedSyncIsNotAcknowledged fails the log's sync under a write:
// Pebble reports it through Fatalf and then returns no error, so the
// store must take the recorded failure as the commit's, and neither
// acknowledge the write nor crash.
func TestFailedSyncIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := &failingSyncFS{FS: vfs.NewMem()}
	s := openStore(t, "/kyu", Options{FS: fs})
	enqueue(t, s, t0, backend.NewJob{})
	fs.armed.Store(true)
	_, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: t0})
	if err == nil {
		t.Fatal("Enqueue whose sync failed was acknowledged")
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: "00000000-0000-0000-0000-000000000000"}); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get after a failed sync = %v; want the store's failure", err)
	}
}
