package pebble

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/kyuhq/kyu/backend"
)

// recordWrites returns the job records the write-ahead log of the store
// in dir holds for id, oldest first, decoded.
func recordWrites(t *testing.T, dir string, id jobID) []*backend.Job {
	t.Helper()
	logs, err := wal.Scan(wal.Dir{FS: vfs.Default, Dirname: filepath.Join(dir, dataDir)})
	if err != nil {
		t.Fatal(err)
	}
	key := jobKey(id)
	var out []*backend.Job
	for i, ll := range logs {
		r := ll.OpenForRead()
		for {
			rec, _, err := r.NextRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			// The newest log, still being written, ends in the zeros
			// walZeroFS writes ahead, which Pebble's recovery reads as
			// its end, as this does.
			if i == len(logs)-1 && errors.Is(err, record.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			repr, err := io.ReadAll(rec)
			if err != nil {
				t.Fatal(err)
			}
			for br := batchrepr.Read(repr); ; {
				kind, k, v, ok, err := br.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if kind == cpebble.InternalKeyKindSet && bytes.Equal(k, key) {
					j, _, err := decodeJob(v)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, j)
				}
			}
		}
		_ = r.Close()
	}
	return out
}

// A job enqueued while a claim waits, which the claim takes in the same
// commit, has its record written once, active: not first pending and
// then again. A job the claim leaves is written once, pending.
func TestClaimWaitFilledJobWrittenOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	answer := claimAsync(context.Background(), s, waitClaimParams(1))
	awaitWaiting(t, s, 1)
	jobs := enqueue(t, s, t0, backend.NewJob{}, backend.NewJob{})
	a := <-answer
	if a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != jobs[0].ID {
		t.Fatalf("ClaimWait = %+v, %v; want the first job enqueued", a.res, a.err)
	}
	for i, want := range []backend.State{backend.StateActive, backend.StatePending} {
		id, _ := parseID(jobs[i].ID)
		writes := recordWrites(t, dir, id)
		if len(writes) != 1 || writes[0].State != want {
			states := make([]backend.State, len(writes))
			for k, j := range writes {
				states[k] = j.State
			}
			t.Errorf("job %d: records written %v; want one, %s", i, states, want)
		}
		if j := get(t, s, jobs[i].ID); j.State != want {
			t.Errorf("job %d is %s; want %s", i, j.State, want)
		}
	}
}
