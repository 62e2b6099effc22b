package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/kyuhq/kyu/backend"
)

// TestJIDFreedByEveryDeletion: every script that deletes a job frees its
// JID (remove in lua/common.lua), so the index keeps no entry of a job
// gone: Purge, a completion with RetainNone and a cancel by deadline
// with RetainNone.
func TestJIDFreedByEveryDeletion(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	enqueue := func(jobs ...backend.NewJob) []backend.EnqueuedJob {
		t.Helper()
		for i := range jobs {
			jobs[i].Type, jobs[i].Queue = "t", "q"
		}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Jobs {
			if r.Duplicate {
				t.Fatalf("enqueue = %+v; want every job written", res.Jobs)
			}
		}
		return res.Jobs
	}
	indexed := func(want int64, why string) {
		t.Helper()
		n, err := s.client.Do(ctx, s.client.B().Hlen().Key(s.keys.jids()).Build()).AsInt64()
		if err != nil || n != want {
			t.Fatalf("jid index holds %d entries (err %v); want %d: %s", n, err, want, why)
		}
	}

	enqueue(backend.NewJob{JID: "p1"}, backend.NewJob{JID: "p2"}, backend.NewJob{})
	indexed(2, "two jobs have a jid")
	if _, err := s.Purge(ctx, backend.PurgeParams{Queue: "q", State: backend.StatePending, Limit: 10, Now: now}); err != nil {
		t.Fatal(err)
	}
	indexed(0, "Purge deleted the jobs")

	enqueue(backend.NewJob{JID: "c", Retention: backend.RetainNone})
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: now})
	if err != nil || len(c.Jobs) != 1 || c.Jobs[0].JID != "c" {
		t.Fatalf("claim = %+v, %v; want the job with jid c", c.Jobs, err)
	}
	b, err := s.Complete(ctx, backend.CompleteParams{Now: now, Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: c.Jobs[0].ID, Token: c.Jobs[0].LeaseToken}}}})
	if err != nil || b.Errors[0] != nil {
		t.Fatalf("complete = %v, %v", b.Errors, err)
	}
	indexed(0, "completing a job kept for no time deleted it")

	enqueue(backend.NewJob{JID: "d", Retention: backend.RetainNone, Deadline: now.Add(time.Second)})
	later := now.Add(time.Minute)
	if _, err := s.Promote(ctx, backend.MaintenanceParams{Now: later}); err != nil {
		t.Fatal(err)
	}
	indexed(0, "its deadline cancelled a job kept for no time")
	enqueue(backend.NewJob{JID: "p1"}, backend.NewJob{JID: "c"}, backend.NewJob{JID: "d"})
}

// TestJIDLaterJobOfBatch: a job refused by its unique key does not take
// its JID, so a later job of the same call with that JID is written, as
// the memory store does.
func TestJIDLaterJobOfBatch(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
		{Type: "t", Queue: "q", UniqueKey: "k"},
		{Type: "t", Queue: "q", UniqueKey: "k", JID: "j"},
		{Type: "t", Queue: "other", JID: "j"},
		{Type: "t", Queue: "q", JID: "j"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Jobs
	if r[0].Duplicate || !r[1].Duplicate || r[1].ID != r[0].ID || r[2].Duplicate || !r[3].Duplicate || r[3].ID != r[2].ID || r[3].State != backend.StatePending {
		t.Fatalf("Enqueue = %+v; want the second a duplicate of the first (key), the third written, the fourth its duplicate (jid)", r)
	}
	j, err := s.Get(ctx, backend.GetParams{JID: "j"})
	if err != nil || j.ID != r[2].ID {
		t.Fatalf("Get(jid j) = %v, %v; want %s", j, err, r[2].ID)
	}
}

// TestJIDStaleEntryTakenOver: an index entry naming a job that no longer
// exists (left by the deletion of a record that fails to parse, by
// eviction or by hand) does not hold its JID: an Enqueue with the JID
// takes it over and returns, where it used to ask the gone holder again
// until its context ended. A live holder still holds (the job written
// here), in the same queue and in another.
func TestJIDStaleEntryTakenOver(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	testJIDStaleEntry(t, s)
}

// testJIDStaleEntry plants a stale entry for a JID in the index the
// enqueue script of queue "q" reads ({P}:jids on one server, the queue's
// own on a Cluster), and one in the store-wide index on a Cluster, then
// enqueues jobs with that JID.
func testJIDStaleEntry(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gone := goneJobID(ctx, t, s, now)
	num, _, err := s.queues.number(ctx, "q", false)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(key, value string) {
		t.Helper()
		if err := s.client.Do(ctx, s.client.B().Hset().Key(key).FieldValue().FieldValue("stale", value).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	plantAll := func() {
		t.Helper()
		plant(s.keys.queue(num).jids(), gone)
		if s.keys.cluster {
			plant(s.keys.jids(), gone+"|c")
		}
	}
	plantAll()

	for _, q := range []string{"q", "other"} {
		r, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: q, JID: "stale"}}})
		if err != nil {
			t.Fatalf("Enqueue in %s with a jid whose entry names a job gone: %v; want the job written", q, err)
		}
		if r.Jobs[0].Duplicate {
			t.Fatalf("Enqueue in %s with a jid whose entry names a job gone = %+v; want the job written", q, r.Jobs[0])
		}
		j, err := s.Get(ctx, backend.GetParams{JID: "stale"})
		if err != nil || j.ID != r.Jobs[0].ID {
			t.Fatalf("Get(jid stale) = %v, %v; want %s", j, err, r.Jobs[0].ID)
		}
		// The new job holds the JID, in its queue and in the other.
		for _, q2 := range []string{"q", "other"} {
			d, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: q2, JID: "stale"}}})
			if err != nil || !d.Jobs[0].Duplicate || d.Jobs[0].ID != j.ID || d.Jobs[0].State != backend.StatePending {
				t.Fatalf("Enqueue in %s with a jid held by %s = %+v, %v; want a Duplicate of it (pending)", q2, j.ID, d.Jobs, err)
			}
		}
		// Gone again, by hand, for the next queue.
		if _, err := s.Purge(ctx, backend.PurgeParams{Queue: q, State: backend.StatePending, Limit: 10, Now: now}); err != nil {
			t.Fatal(err)
		}
		plantAll()
	}
}

// TestJIDFreedWithUnparsedRecord: a job whose record does not parse
// frees its JID when Delete or retention removes it (the JID is read
// from the body's trailer), in both formats; it used to leave its index
// entry behind, naming the job gone.
func TestJIDFreedWithUnparsedRecord(t *testing.T) {
	t.Parallel()
	eachFormat(t, func(t *testing.T, s *Store, _ int) { testJIDUnparsed(t, s) })
}

// testJIDUnparsed writes a job with a JID for Delete and a completed one
// with a JID for retention, turns their headers into nonsense, removes
// them and checks that the queue's JID index names neither.
func testJIDUnparsed(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := s.client
	enqueue := func(nj backend.NewJob) string {
		t.Helper()
		nj.Type, nj.Queue = "t", "q"
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj}})
		if err != nil || res.Jobs[0].Duplicate {
			t.Fatalf("Enqueue = %+v, %v; want the job written", res.Jobs, err)
		}
		return res.Jobs[0].ID
	}
	ret := enqueue(backend.NewJob{JID: "ret", Retention: backend.RetainFor(time.Hour)})
	cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: now})
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != ret {
		t.Fatalf("Claim = %+v, %v; want %s", cl.Jobs, err, ret)
	}
	b, err := s.Complete(ctx, backend.CompleteParams{Now: now, Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: ret, Token: cl.Jobs[0].LeaseToken}}}})
	if err != nil || b.Errors[0] != nil {
		t.Fatalf("Complete = %v, %v", b.Errors, err)
	}
	del := enqueue(backend.NewJob{JID: "del"})
	num, _ := queueNumOf(del)
	qk := s.keys.queue(num)
	for _, id := range []string{ret, del} {
		rec, err := c.Do(ctx, c.B().Hget().Key(qk.jobs()).Field(id).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		_, body := recordHead(rec)
		if err := c.Do(ctx, c.B().Hset().Key(qk.jobs()).FieldValue().FieldValue(id, "p|x\n"+body).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, backend.GetParams{ID: id}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Get of %s with a header that does not parse = %v; want ErrCorrupt", id, err)
		}
	}
	indexed := func(jid, why string) {
		t.Helper()
		v, err := c.Do(ctx, c.B().Hget().Key(qk.jids()).Field(jid).Build()).ToString()
		if !rueidis.IsRedisNil(err) {
			t.Errorf("jid index entry %q = %q, %v after %s; want none", jid, v, err, why)
		}
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: del, Now: now}); err != nil {
		t.Fatalf("Delete of a record that does not parse: %v", err)
	}
	indexed("del", "Delete")
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, c.B().Hexists().Key(qk.jobs()).Field(ret).Build()).AsBool(); err != nil || n {
		t.Fatalf("record of %s after retention: exists %v, %v; want it gone", ret, n, err)
	}
	indexed("ret", "retention")
}

// goneJobID writes a job of queue "q" and purges it: its id is a
// well-formed id of q that names no job.
func goneJobID(ctx context.Context, t *testing.T, s *Store, now time.Time) string {
	t.Helper()
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, backend.PurgeParams{Queue: "q", State: backend.StatePending, Limit: 10, Now: now}); err != nil {
		t.Fatal(err)
	}
	return res.Jobs[0].ID
}

// TestJIDStaleEntryImport: Import takes over a JID whose index entry
// names a job gone, as Enqueue does, where it used to report the JID
// held by that job; a live holder still holds it.
func TestJIDStaleEntryImport(t *testing.T) {
	t.Parallel()
	testJIDStaleImport(t, openTest(t, ""))
}

// testJIDStaleImport plants a stale entry for a JID in the index the
// import script of queue "q" reads (and one in the store-wide index on a
// Cluster), then imports a job of q with that JID, whose id is not of
// the store's numbering (so it has a home), and another after it.
func testJIDStaleImport(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gone := goneJobID(ctx, t, s, now)
	num, _ := queueNumOf(gone)
	plant := func(key, value string) {
		t.Helper()
		if err := s.client.Do(ctx, s.client.B().Hset().Key(key).FieldValue().FieldValue("stale", value).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	plant(s.keys.queue(num).jids(), gone)
	if s.keys.cluster {
		plant(s.keys.jids(), gone+"|c")
	}
	job := func() *backend.Job {
		u := uuid.Must(uuid.NewV7())
		u[9], u[10], u[11] = 0xff, 0xff, 0xff // no queue's number
		return &backend.Job{ID: u.String(), Type: "t", Queue: "q", State: backend.StatePending, MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, CreatedAt: now, Payload: []byte(`{}`), JID: "stale"}
	}
	first, second := job(), job()
	r, err := s.Import(ctx, backend.ImportParams{Now: now, Jobs: []*backend.Job{first}})
	if err != nil || r.Items[0].Outcome != backend.ImportCreated {
		t.Fatalf("Import with a jid whose entry names a job gone = %+v, %v; want it created", r.Items, err)
	}
	if j, err := s.Get(ctx, backend.GetParams{JID: "stale"}); err != nil || j.ID != first.ID {
		t.Fatalf("Get(jid stale) = %v, %v; want %s", j, err, first.ID)
	}
	r, err = s.Import(ctx, backend.ImportParams{Now: now, Jobs: []*backend.Job{second}})
	if err != nil || r.Items[0].Outcome != backend.ImportConflict || r.Items[0].HolderID != first.ID {
		t.Fatalf("Import with a jid held by %s = %+v, %v; want a conflict naming it", first.ID, r.Items, err)
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: second.ID}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get of the job refused = %v; want ErrNotFound", err)
	}
}
