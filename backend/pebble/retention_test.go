package pebble

import (
	"context"
	"errors"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// finishJobs enqueues one job per retention, claims and completes them all
// at now, and returns their ids.
func finishJobs(t *testing.T, s *Store, now time.Time, keep ...backend.Retention) []string {
	t.Helper()
	ids := make([]string, len(keep))
	for i, r := range keep {
		ids[i] = enqueue(t, s, now, backend.NewJob{Retention: r})[0].ID
	}
	for _, j := range claim(t, s, now, len(keep)) {
		res, err := s.completeOne(context.Background(), j)
		mustOK(t, "Complete", res, err)
	}
	return ids
}

// hour is a retention of n hours.
func hour(n int) backend.Retention { return backend.RetainFor(time.Duration(n) * time.Hour) }

// applyRetention runs ApplyRetention at now and checks how many jobs it
// deleted.
func applyRetention(t *testing.T, s *Store, now time.Time, want int) {
	t.Helper()
	m, err := s.ApplyRetention(context.Background(), backend.MaintenanceParams{Now: now})
	if err != nil || m.Moved != want {
		t.Fatalf("ApplyRetention at %s = %+v, %v; want %d deleted", now, m, err, want)
	}
}

// gone checks that a job no longer exists.
func gone(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, err := s.Get(context.Background(), backend.GetParams{ID: id}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get(%s) = %v; want ErrNotFound", id, err)
	}
}

// Retention skips the jobs deleted or retried before their time, and
// leaves no keys once it has swept them all.
func TestRetentionSkipsRetriedAndDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	ids := finishJobs(t, s, t0, hour(1), hour(2), hour(3))
	failed := enqueue(t, s, t0, backend.NewJob{MaxAttempts: 1})[0].ID
	j := claim(t, s, t0, 1)[0]
	if _, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leaseOf(j), Message: "x"}}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry(ctx, backend.RetryParams{ID: failed, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: ids[1], Now: t0}); err != nil {
		t.Fatal(err)
	}
	applyRetention(t, s, t0.Add(time.Hour-time.Nanosecond), 0)
	applyRetention(t, s, t0.Add(3*time.Hour), 2)
	gone(t, s, ids[0])
	gone(t, s, ids[2])
	applyRetention(t, s, t0.Add(backend.DefaultRetentionFailed+time.Hour), 0)
	get(t, s, failed)
	if n := countKeys(t, s, prefixRetention); n != 0 {
		t.Fatalf("%d retention keys after every one was swept", n)
	}
}

// A step's limit may stop it inside the list of one group's jobs: the
// next step goes on with the rest.
func TestRetentionLimitSplitsAList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, t.TempDir(), Options{})
	var ids []string
	for range 5 {
		ids = append(ids, enqueue(t, s, t0, backend.NewJob{Retention: hour(1)})[0].ID)
	}
	var items []backend.CompleteItem
	for _, j := range claim(t, s, t0, 5) {
		items = append(items, backend.CompleteItem{Lease: leaseOf(j)})
	}
	if _, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, prefixRetention); n != 1 {
		t.Fatalf("%d retention keys for 5 jobs finished in one group at one time; want 1", n)
	}
	for _, want := range []int{2, 2, 1, 0} {
		m, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: t0.Add(time.Hour), Limit: 2})
		if err != nil || m.Moved != want {
			t.Fatalf("ApplyRetention with limit 2 = %+v, %v; want %d deleted", m, err, want)
		}
	}
	for _, id := range ids {
		gone(t, s, id)
	}
}

// A key written before where the last sweep stopped (a shorter retention
// than the jobs swept) is swept all the same.
func TestRetentionSweepGoesBack(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	finishJobs(t, s, t0, hour(2), hour(3))
	applyRetention(t, s, t0.Add(4*time.Hour), 2)
	late := finishJobs(t, s, t0, hour(1))
	applyRetention(t, s, t0.Add(4*time.Hour), 1)
	gone(t, s, late[0])
}

// A key whose write is still in flight when a sweep reads the index (it
// reads what is committed) is swept by the next one, although the sweep
// went past its time.
func TestRetentionSweepSeesLaterCommits(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), Options{})
	finishJobs(t, s, t0, hour(2))
	id := enqueue(t, s, t0, backend.NewJob{Retention: backend.RetainFor(time.Hour)})[0].ID
	j := claim(t, s, t0, 1)[0]

	// One section under mu: complete the job (its write is queued, not
	// committed), then sweep past both jobs' times.
	if err := s.lockState(); err != nil {
		t.Fatal(err)
	}
	jid := mustParse(t, id)
	rec, sd, err := s.load(jid)
	if err != nil || rec == nil || rec.LeaseToken != j.LeaseToken {
		s.unlock()
		t.Fatalf("load of the claimed job = %+v, %v", rec, err)
	}
	s.toFinal(jid, rec, sd, backend.StateCompleted, t0)
	moved, err := s.sweepRetention(timeCode(t0.Add(3*time.Hour)), 100)
	g := s.lastGroup()
	s.unlock()
	if err != nil || moved != 1 {
		t.Fatalf("sweep with a write in flight deleted %d, %v; want the committed job only", moved, err)
	}
	if err := wait(g); err != nil {
		t.Fatal(err)
	}
	applyRetention(t, s, t0.Add(3*time.Hour), 1)
	gone(t, s, id)
}

// A store of format 3 has no retention index: the first open writes it,
// and its final jobs are deleted on time. An open that stopped before it
// was done writes it again.
func TestRetentionIndexMigration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	ids := finishJobs(t, s, t0, hour(1), hour(2))
	forever := finishJobs(t, s, t0, backend.RetainForever)
	pending := enqueue(t, s, t0, backend.NewJob{})[0].ID

	// As format 3 left it: no retention keys, no flag.
	dropIndex := func(s *Store, keep int) {
		t.Helper()
		b := s.db.NewBatch()
		it, err := s.db.NewIter(&cpebble.IterOptions{LowerBound: []byte{prefixRetention}, UpperBound: []byte{prefixRetention + 1}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if n++; n > keep {
				_ = b.Delete(append([]byte(nil), it.Key()...), nil)
			}
		}
		_ = it.Close()
		_ = b.Delete([]byte{prefixRetentionBuilt}, nil)
		if err := b.Commit(cpebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	dropIndex(s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkerVersion(dir, 3); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	if v, err := readMarker(vfsDefault(), dir); err != nil || v != formatVersion {
		t.Fatalf("marker after opening a format 3 store = %d, %v; want %d", v, err, formatVersion)
	}
	if n := countKeys(t, s, prefixRetention); n != 2 {
		t.Fatalf("%d retention keys written for 2 final jobs that retention deletes at 2 times", n)
	}
	if n := countKeys(t, s, prefixRetentionBuilt); n != 1 {
		t.Fatal("no flag for the retention index written")
	}

	// An open that wrote the first key only.
	dropIndex(s, 1)
	s = reopen(t, s, dir)
	if n := countKeys(t, s, prefixRetention); n != 2 {
		t.Fatalf("%d retention keys after an interrupted migration; want 2", n)
	}
	applyRetention(t, s, t0.Add(time.Hour-time.Nanosecond), 0)
	applyRetention(t, s, t0.Add(time.Hour), 1)
	gone(t, s, ids[0])
	applyRetention(t, s, t0.Add(48*time.Hour), 1)
	gone(t, s, ids[1])
	get(t, s, forever[0])
	get(t, s, pending)
}
