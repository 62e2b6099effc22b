package pebble

import (
	"context"
	"math/rand/v2"
	"strings"
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
