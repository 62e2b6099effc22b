package pebble

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// newestLog returns the size of the newest write-ahead log file in the
// store at dir and how many log files there are.
func newestLog(t *testing.T, fs vfs.FS, dir string) (size int64, logs int) {
	t.Helper()
	data := fs.PathJoin(dir, dataDir)
	names, err := fs.List(data)
	if err != nil {
		t.Fatal(err)
	}
	newest := ""
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs++
			if n > newest {
				newest = n
			}
		}
	}
	if newest == "" {
		t.Fatalf("no log file in %s: %v", data, names)
	}
	fi, err := fs.Stat(fs.PathJoin(data, newest))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), logs
}

// TestWALZeroAheadPowerLoss checks that a new log file holds synced zeros
// ahead of Pebble's records, and that a store whose power fails with the
// zeros there (in the newest log, and after older logs' ends) reopens with
// every acknowledged job and every acknowledged claim.
func TestWALZeroAheadPowerLoss(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	// A small memtable: the logs rotate, so clones hold older log files
	// (closed with an EOF trailer before the zeros) as well as the newest.
	s := openStore(t, "/kyu", Options{FS: fs, MemTableSize: 256 << 10})
	ctx := context.Background()
	enqueued := map[string]bool{}
	claimed := map[string]int64{}
	now := t0
	multi := 0
	const rounds = 10
	for round := range rounds {
		for range 25 {
			now = now.Add(time.Millisecond)
			jobs := make([]backend.NewJob, 10)
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "t", Payload: []byte(strings.Repeat("p", 200)), Retention: backend.RetainForever}
			}
			res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range res.Jobs {
				enqueued[j.ID] = true
			}
			cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 3, Lease: time.Hour, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range cl.Jobs {
				claimed[j.ID] = j.LeaseToken
			}
		}
		size, logs := newestLog(t, fs, "/kyu")
		if size < walZeroChunk {
			t.Fatalf("round %d: newest log is %d bytes; want a zeroed region of at least %d", round, size, walZeroChunk)
		}
		if logs > 1 {
			multi++
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(2, uint64(round)))})
		r := openStore(t, "/kyu", Options{FS: crashed})
		for id := range enqueued {
			j, err := r.Get(ctx, backend.GetParams{ID: id})
			if err != nil {
				t.Fatalf("round %d: acknowledged enqueue %s lost: %v", round, id, err)
			}
			if tok, ok := claimed[id]; ok && (j.State != backend.StateActive || j.LeaseToken != tok) {
				t.Fatalf("round %d: acknowledged claim of %s (token %d) lost: state %s token %d", round, id, tok, j.State, j.LeaseToken)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d clones held more than one log file", multi, rounds)
	// A clean close and reopen reads logs that end in an EOF trailer with
	// zeros after it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, "/kyu", Options{FS: fs})
	for id := range enqueued {
		if _, err := r.Get(ctx, backend.GetParams{ID: id}); err != nil {
			t.Fatalf("after reopening: enqueue %s lost: %v", id, err)
		}
	}
}

// TestWALZeroAheadRecycled checks that Pebble's writes into its logs never
// grow them, recycled logs included: Pebble recycles its oldest logs
// first, those of the small memtables it starts with, and writes a full
// memtable's log into them, past their old end.
func TestWALZeroAheadRecycled(t *testing.T) {
	t.Parallel()
	mem := vfs.NewCrashableMem()
	fs := &logWriteFS{FS: mem}
	s := openStore(t, "/kyu", Options{FS: fs, MemTableSize: 4 << 20})
	ctx := context.Background()
	payload := []byte(strings.Repeat("p", 1000))
	var ids []string
	for round := 0; ; round++ {
		reused, past, grown := fs.counts()
		if reused >= 2 && past > 0 {
			if grown > 0 {
				t.Fatalf("%d of Pebble's log writes grew the file (%d recycled logs, %d bytes written past their old end)", grown, reused, past)
			}
			t.Logf("%d rounds: %d recycled logs, %d bytes written past their old end, none growing the file", round, reused, past)
			break
		}
		if round == 2000 {
			t.Fatalf("after %d rounds of 100 jobs: %d recycled logs, %d bytes written past their old end", round, reused, past)
		}
		jobs := make([]backend.NewJob, 100)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Payload: payload}
		}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
	}
	// A power loss with the newest log recycled, its records followed by
	// the old log's and by zeros, keeps every acknowledged job.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(3, 1))})
	r := openStore(t, "/kyu", Options{FS: crashed})
	for _, id := range ids {
		if _, err := r.Get(ctx, backend.GetParams{ID: id}); err != nil {
			t.Fatalf("acknowledged enqueue %s lost: %v", id, err)
		}
	}
}

// logWriteFS counts, of the sequential writes into log files (Pebble's;
// the zeros ahead are written at offsets), those that grew the file, and
// the recycled logs and the bytes written into them past their old end.
type logWriteFS struct {
	vfs.FS
	mu                  sync.Mutex
	reused, past, grown int64
}

func (fs *logWriteFS) counts() (reused, past, grown int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.reused, fs.past, fs.grown
}

func (fs *logWriteFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &logWriteFile{File: f, fs: fs, oldEnd: -1}, nil
}

func (fs *logWriteFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !strings.HasSuffix(newname, ".log") {
		return f, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	fs.reused++
	fs.mu.Unlock()
	return &logWriteFile{File: f, fs: fs, oldEnd: fi.Size()}, nil
}

type logWriteFile struct {
	vfs.File
	fs     *logWriteFS
	off    int64
	oldEnd int64 // a recycled log's size when reused, else -1
}

func (f *logWriteFile) Write(p []byte) (int, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	end := f.off + int64(len(p))
	f.fs.mu.Lock()
	if end > fi.Size() {
		f.fs.grown++
	}
	if f.oldEnd >= 0 && end > f.oldEnd {
		f.fs.past += end - max(f.off, f.oldEnd)
	}
	f.fs.mu.Unlock()
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}
