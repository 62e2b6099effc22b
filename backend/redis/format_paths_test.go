package redis

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// recordForm is how a stored record is written: its header short or
// left out (bare), its run-at "" (its creation), its body compact.
type recordForm struct{ short, bare, noRunAt, compact bool }

// formOf reads the form of the record rec.
func formOf(t *testing.T, id, rec string) recordForm {
	t.Helper()
	var h [headerFields]string
	rest, ok := splitRecord(rec, &h)
	if !ok {
		t.Fatalf("job %s: record %q has no header that parses", id, rec)
	}
	ulen, err := strconv.Atoi(h[hUniqueLen-1])
	if err != nil || ulen > len(rest) || ulen == len(rest) {
		t.Fatalf("job %s: record %q: unique key length %q", id, rec, h[hUniqueLen-1])
	}
	head, _ := recordHead(rec)
	return recordForm{short: !isBare(rec) && isShortHeader(head), bare: isBare(rec), noRunAt: h[hRunAt-1] == "", compact: rest[ulen] >= bodyCompact}
}

// storedRecords is the records of the jobs ids as stored, by id.
func storedRecords(t *testing.T, s *Store, ids ...string) map[string]string {
	t.Helper()
	ctx, c := context.Background(), s.client
	out := map[string]string{}
	for _, id := range ids {
		num, _ := queueNumOf(id)
		rec, err := c.Do(ctx, c.B().Hget().Key(s.keys.queue(num).jobs()).Field(id).Build()).ToString()
		if err != nil {
			t.Fatalf("record of %s: %v", id, err)
		}
		out[id] = rec
	}
	return out
}

// allRecords is every record in every jobs hash of s's prefix.
func allRecords(t *testing.T, s *Store) map[string]string {
	t.Helper()
	ctx, c := context.Background(), s.client
	out := map[string]string{}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("*"+s.opts.Prefix+"*:jobs").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range e.Elements {
			m, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
			if err != nil {
				t.Fatalf("HGETALL %s: %v", k, err)
			}
			maps.Copy(out, m)
		}
		if cursor = e.Cursor; cursor == 0 {
			return out
		}
	}
}

// checkFormat2 fails t for any record of s in a form of format 3 only.
func checkFormat2(t *testing.T, s *Store, step string, want int) {
	t.Helper()
	recs := allRecords(t, s)
	if len(recs) < want {
		t.Fatalf("%s: %d records, want at least %d", step, len(recs), want)
	}
	for id, rec := range recs {
		if f := formOf(t, id, rec); f != (recordForm{}) {
			t.Errorf("%s: job %s of a format-2 store is written %+v: %q", step, id, f, rec)
		}
	}
}

// TestFormatFieldsRoundTrip: a job of every field set its own way, one
// of every field left alone but its max attempts, and two of every field
// left alone (one with a JID), keep every field through enqueue, claim,
// fail (to retry), claim, fail (final), Retry, claim and complete on a
// store of either format (Get after each step); a format-2 store holds
// no record of format 3's forms at any step, a format-3 store the short
// header for the plain job and bare records for the bare ones until
// they are claimed, and the compact body for all throughout.
func TestFormatFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	eachFormat(t, func(t *testing.T, s *Store, v int) {
		ctx := t.Context()
		now := time.Now().Add(-time.Hour).Truncate(time.Millisecond).UTC()
		full := backend.NewJob{
			Type: "full", Queue: "q", Payload: []byte("pay|\nload"), Title: "a title", Priority: 7,
			RunAt: now.Add(time.Second), MaxAttempts: 3, Timeout: 90 * time.Second, Deadline: now.Add(24 * time.Hour),
			UniqueKey: "uk|\n" + strconv.Itoa(v), UniqueFor: 2 * time.Hour, JID: "jid-" + testPrefix(t),
			Tags: []string{"a", "b"}, Metadata: map[string]string{"k": "v", "e": ""}, Retention: backend.RetainFor(3 * time.Hour),
		}
		plain := backend.NewJob{Type: "plain", Queue: "q", MaxAttempts: 3}
		bare := backend.NewJob{Type: "bare", Queue: "q"}
		bareJID := backend.NewJob{Type: "bare jid", Queue: "q", JID: "jid2-" + testPrefix(t)}
		all := []backend.NewJob{full, plain, bare, bareJID}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: all})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		nj := map[string]backend.NewJob{}
		timeout := map[string]time.Duration{}
		runAt := map[string]time.Time{}
		for k, j := range res.Jobs {
			ids = append(ids, j.ID)
			nj[j.ID], timeout[j.ID], runAt[j.ID] = all[k], backend.DefaultTimeout, now
		}
		timeout[ids[0]], runAt[ids[0]] = full.Timeout, full.RunAt

		// check checks every job after step: the full one in the state
		// fullState, the others in state; enqueued says whether none was
		// claimed yet.
		check := func(step string, fullState, state backend.State, attempt int, enqueued bool) {
			t.Helper()
			for k, id := range ids {
				state := state
				if k == 0 {
					state = fullState
				}
				j, err := s.Get(ctx, backend.GetParams{ID: id})
				if err != nil {
					t.Fatalf("%s: Get(%s): %v", step, id, err)
				}
				w := nj[id]
				if w.MaxAttempts == 0 {
					w.MaxAttempts = backend.DefaultMaxAttempts
				}
				for _, d := range []struct {
					name      string
					got, want any
				}{
					{"state", j.State, state}, {"attempt", j.Attempt, attempt}, {"type", j.Type, w.Type},
					{"queue", j.Queue, w.Queue}, {"payload", string(j.Payload), string(w.Payload)},
					{"title", j.Title, w.Title}, {"priority", j.Priority, w.Priority},
					{"max attempts", j.MaxAttempts, w.MaxAttempts}, {"timeout", j.Timeout, timeout[id]},
					{"deadline", j.Deadline.UnixMilli(), w.Deadline.UnixMilli()}, {"unique key", j.UniqueKey, w.UniqueKey},
					{"unique for", j.UniqueFor, w.UniqueFor}, {"jid", j.JID, w.JID}, {"retention", j.Retention, w.Retention},
					{"created", j.CreatedAt.UnixMilli(), now.UnixMilli()}, {"run at", j.RunAt.UnixMilli(), runAt[id].UnixMilli()},
					{"tags", slices.Equal(j.Tags, w.Tags), true}, {"metadata", maps.Equal(j.Metadata, w.Metadata), true},
				} {
					if d.got != d.want {
						t.Errorf("%s: job %s: %s = %v, want %v", step, w.Type, d.name, d.got, d.want)
					}
				}
				if w.Deadline.IsZero() != j.Deadline.IsZero() {
					t.Errorf("%s: job %s: deadline %v, want %v", step, w.Type, j.Deadline, w.Deadline)
				}
			}
			if v < 3 {
				checkFormat2(t, s, step, len(ids))
				return
			}
			for id, rec := range storedRecords(t, s, ids...) {
				f := formOf(t, id, rec)
				if !f.compact {
					t.Errorf("%s: job %s: body not compact: %q", step, nj[id].Type, rec)
				}
				if want := id == ids[1] && enqueued; f.short != want {
					t.Errorf("%s: job %s: short header %v, want %v: %q", step, nj[id].Type, f.short, want, rec)
				}
				if want := (id == ids[2] || id == ids[3]) && enqueued; f.bare != want {
					t.Errorf("%s: job %s: bare %v, want %v: %q", step, nj[id].Type, f.bare, want, rec)
				}
			}
		}
		claim := func(step string, at time.Time) []backend.Lease {
			t.Helper()
			got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: at})
			if err != nil || len(got.Jobs) != len(ids) {
				t.Fatalf("%s: Claim = %d jobs, %v; want %d", step, len(got.Jobs), err, len(ids))
			}
			var ls []backend.Lease
			for _, j := range got.Jobs {
				ls = append(ls, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
			}
			return ls
		}
		fail := func(step string, ls []backend.Lease, at, retryAt time.Time, final bool) {
			t.Helper()
			var items []backend.FailItem
			for _, l := range ls {
				items = append(items, backend.FailItem{Lease: l, Message: "no", RetryAt: retryAt, Final: final})
			}
			r, err := s.Fail(ctx, backend.FailParams{Items: items, Now: at})
			if err != nil {
				t.Fatalf("%s: Fail: %v", step, err)
			}
			for _, e := range r.Errors {
				if e != nil {
					t.Fatalf("%s: Fail: %v", step, e)
				}
			}
		}

		P, S, A, R, F, C := backend.StatePending, backend.StateScheduled, backend.StateActive, backend.StateRetry, backend.StateFailed, backend.StateCompleted
		check("enqueued", S, P, 0, true)
		at := now.Add(2 * time.Second)
		ls := claim("claim 1", at)
		check("claim 1", A, A, 1, false)
		retryAt := at.Add(time.Minute)
		fail("fail 1", ls, at, retryAt, false)
		for _, id := range ids {
			runAt[id] = retryAt
		}
		check("fail 1", R, R, 1, false)
		at = retryAt.Add(time.Second)
		ls = claim("claim 2", at)
		check("claim 2", A, A, 2, false)
		fail("fail 2", ls, at, time.Time{}, true)
		check("fail 2", F, F, 2, false)
		at = at.Add(time.Minute)
		for _, id := range ids {
			if _, err := s.Retry(ctx, backend.RetryParams{ID: id, Now: at}); err != nil {
				t.Fatalf("Retry(%s): %v", id, err)
			}
			runAt[id] = at
		}
		check("retry", P, P, 2, false)
		ls = claim("claim 3", at)
		check("claim 3", A, A, 3, false)
		var items []backend.CompleteItem
		for _, l := range ls {
			items = append(items, backend.CompleteItem{Lease: l})
		}
		r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: at})
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		for _, e := range r.Errors {
			if e != nil {
				t.Fatalf("Complete = %+v", r)
			}
		}
		check("complete", C, C, 3, false)
	})
}

// TestFormat2WritesNoFormat3: no way of writing a job, in a store of
// format 2, leaves a record in a form that a kyu of format 2 cannot
// read (short header, run-at "", compact body): the lean, full and JID
// enqueues, a lone one, one handed to a waiting claim, Import, and the
// claim, release, lease recovery, fail, retry, cancel and run-now of
// jobs of default fields.
func TestFormat2WritesNoFormat3(t *testing.T) {
	t.Parallel()
	s := openTestFormat(t, 2)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond).UTC()
	enq := func(jobs ...backend.NewJob) []string {
		t.Helper()
		return enqueueIDs(t, s, now, jobs...)
	}
	plain := backend.NewJob{Type: "t", Queue: "q"}
	enq(plain, plain, plain)
	enq(plain)
	enq(backend.NewJob{Type: "t", Queue: "q", JID: "j1-" + testPrefix(t)}, plain)
	enq(backend.NewJob{Type: "t", Queue: "q", RunAt: now.Add(time.Hour)})
	// A job handed to a waiting claim ("enqueue claim").
	deafen(t, s)
	answer := claimAsync(ctx, s, waitClaimParams(1, "h"))
	awaitHandoffs(t, s, 1)
	handed := enqueueOneJob(t, s, "h")
	if a := <-answer; a.err != nil || len(a.res.Jobs) != 1 || a.res.Jobs[0].ID != handed {
		t.Fatalf("ClaimWait = %+v, %v; want job %s", a.res, a.err, handed)
	}
	// Import of a pending job of default fields.
	id, err := newJobID(0)
	if err != nil {
		t.Fatal(err)
	}
	created := time.UnixMilli(idMilli(id)).UTC()
	if _, err := s.Import(ctx, backend.ImportParams{Now: now, Jobs: []*backend.Job{{
		ID: id, Queue: "q", Type: "t", State: backend.StatePending, MaxAttempts: 25, Timeout: backend.DefaultTimeout,
		RunAt: created, CreatedAt: created,
	}}}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "enqueued", 9)

	claimAll := func(step string, at time.Time, lease time.Duration) []backend.Lease {
		t.Helper()
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 100, Lease: lease, WorkerID: "w", Now: at})
		if err != nil || len(got.Jobs) == 0 {
			t.Fatalf("%s: Claim = %d jobs, %v", step, len(got.Jobs), err)
		}
		var ls []backend.Lease
		for _, j := range got.Jobs {
			ls = append(ls, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
		}
		checkFormat2(t, s, step, 9)
		return ls
	}
	ls := claimAll("claim", now, time.Minute)
	if _, err := s.Release(ctx, backend.ReleaseParams{Leases: ls, Now: now}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "release", 9)
	claimAll("claim 2", now, time.Second)
	if _, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Minute), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "recover", 9)
	at := now.Add(time.Minute)
	ls = claimAll("claim 3", at, time.Minute)
	var items []backend.FailItem
	for i, l := range ls {
		items = append(items, backend.FailItem{Lease: l, Message: "no", Final: i%2 == 0})
	}
	if _, err := s.Fail(ctx, backend.FailParams{Items: items, Now: at}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "fail", 9)
	if _, err := s.RetryQueue(ctx, backend.RetryQueueParams{Queue: "q", State: backend.StateFailed, Limit: 100, Now: at}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "retry queue", 9)
	if _, err := s.Promote(ctx, backend.MaintenanceParams{Now: at.Add(time.Minute), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "promote", 9)
	late := enq(backend.NewJob{Type: "t", Queue: "q", RunAt: now.Add(time.Hour)}, plain)
	if _, err := s.RunNow(ctx, backend.RunNowParams{ID: late[0], Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: late[1], Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry(ctx, backend.RetryParams{ID: late[1], Now: now}); err != nil {
		t.Fatal(err)
	}
	checkFormat2(t, s, "run now, cancel, retry", 11)
}

// TestShortJobBodyReaders: the scripts' readers of a compact body find
// their field past the fields set before it, for a job of a short
// header, and for one of a bare record, with a title, timeout, tags,
// metadata, JID and a created time other than its id's, and for a job
// of a bare record whose body holds its created time in its version
// (bodyCompactDefaults): a claim by type and by byte budget takes it,
// its Release and lease recovery score it by its creation (runAtOf),
// and its Delete frees its JID (jobJID).
func TestShortJobBodyReaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		maxAttempts int
		back        time.Duration
		full        bool
	}{{"short", 3, 5 * time.Second, true}, {"bare", 0, 5 * time.Second, true}, {"bare folded", 0, 3 * time.Millisecond, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testShortJobBodyReaders(t, c.maxAttempts, c.back, c.full)
		})
	}
}

// testShortJobBodyReaders is TestShortJobBodyReaders for a job of
// maxAttempts enqueued back before the clock, with the title, timeout,
// tags and metadata set when full is.
func testShortJobBodyReaders(t *testing.T, maxAttempts int, back time.Duration, full bool) {
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Now().Add(-back).Truncate(time.Millisecond).UTC()
	jid := "jid-" + testPrefix(t)
	nj := backend.NewJob{Type: "a", Queue: "q", Payload: []byte("0123456789"), Timeout: backend.DefaultTimeout, JID: jid, MaxAttempts: maxAttempts}
	if full {
		nj.Title, nj.Timeout, nj.Tags, nj.Metadata = "a title", 45*time.Second, []string{"x"}, map[string]string{"k": "v"}
	}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Jobs[0].ID
	rec := storedRecords(t, s, id)[id]
	if f := formOf(t, id, rec); f.short != (maxAttempts != 0) || f.bare != (maxAttempts == 0) || !f.compact {
		t.Fatalf("record of the job is %+v, want a short header (or none for the default max attempts) and a compact body", f)
	}
	_, body := recordHead(rec)
	if d := idMilli(id) - now.UnixMilli(); !full && d <= maxFoldedCreated && body[0] != bodyCompactDefaults+2*byte(d)+1 {
		t.Fatalf("body of the job created %d ms before its id: version %d, want %d", d, body[0], bodyCompactDefaults+2*byte(d)+1)
	}
	num, _ := queueNumOf(id)
	qk := s.keys.queue(num)
	score := func() string {
		t.Helper()
		v, err := c.Do(ctx, c.B().Zscore().Key(qk.ready()).Member(id).Build()).ToString()
		if err != nil {
			t.Fatalf("score of %s: %v", id, err)
		}
		return v
	}
	want := score()
	claim := func(p backend.ClaimParams) backend.Lease {
		t.Helper()
		p.Queues, p.Max, p.WorkerID, p.Now = []string{"q"}, 1, "w", now
		got, err := s.Claim(ctx, p)
		if err != nil || len(got.Jobs) != 1 || got.Jobs[0].ID != id {
			t.Fatalf("Claim(%+v) = %+v, %v; want the job", p, got, err)
		}
		if j := got.Jobs[0]; j.Title != nj.Title || j.Timeout != nj.Timeout || j.JID != jid || !j.RunAt.Equal(now) || !j.CreatedAt.Equal(now) {
			t.Errorf("claimed job %+v, want it as enqueued", j)
		}
		return backend.Lease{JobID: id, Token: got.Jobs[0].LeaseToken}
	}
	l := claim(backend.ClaimParams{Types: []string{"a"}, Lease: time.Minute})
	if r, err := s.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{l}, Now: now}); err != nil || r.Errors[0] != nil {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	if got := score(); got != want {
		t.Errorf("released job scored %s, want %s as enqueued", got, want)
	}
	claim(backend.ClaimParams{MaxBytes: 5, Lease: time.Second})
	if r, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Minute), Limit: 10}); err != nil || r.Moved != 1 {
		t.Fatalf("RecoverLeases = %+v, %v; want 1 moved", r, err)
	}
	if got := score(); got != want {
		t.Errorf("recovered job scored %s, want %s as enqueued", got, want)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: id, Now: now}); err != nil {
		t.Fatal(err)
	}
	again, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{nj}})
	if err != nil || again.Jobs[0].Duplicate {
		t.Fatalf("Enqueue of the deleted job's JID = %+v, %v; want a new job", again, err)
	}
}

// TestShortJobFinalRunAt: a job of a short header that ends without a
// retry (completed, cancelled while pending, cancelled while active,
// failed by lease expiry) keeps its run-at "" to the end, and Get reads
// it as its creation time.
func TestShortJobFinalRunAt(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond).UTC()
	plain := backend.NewJob{Type: "t", Queue: "q", MaxAttempts: 1}
	ids := enqueueIDs(t, s, now, plain, plain, plain, plain)
	for id, rec := range storedRecords(t, s, ids...) {
		if !formOf(t, id, rec).short {
			t.Fatalf("job %s: record %q, want a short header", id, rec)
		}
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: ids[0], Now: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 3, Lease: time.Second, WorkerID: "w", Now: now})
	if err != nil || len(got.Jobs) != 3 {
		t.Fatalf("Claim = %d jobs, %v; want 3", len(got.Jobs), err)
	}
	lease := map[string]backend.Lease{}
	for _, j := range got.Jobs {
		lease[j.ID] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	if r, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: lease[ids[1]]}}, Now: now}); err != nil || r.Errors[0] != nil {
		t.Fatalf("Complete = %+v, %v", r, err)
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: ids[2], Now: now}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: lease[ids[2]], Message: "stop"}}, Now: now}); err != nil || r.Errors[0] != nil {
		t.Fatalf("Fail = %+v, %v", r, err)
	}
	if r, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Minute), Limit: 10}); err != nil || r.Moved != 1 {
		t.Fatalf("RecoverLeases = %+v, %v; want 1 moved", r, err)
	}
	for k, want := range []backend.State{backend.StateCancelled, backend.StateCompleted, backend.StateCancelled, backend.StateFailed} {
		j, err := s.Get(ctx, backend.GetParams{ID: ids[k]})
		if err != nil || j.State != want || !j.RunAt.Equal(now) || !j.CreatedAt.Equal(now) {
			t.Errorf("job %d: Get = %+v, %v; want %s, due and created at %v", k, j, err, want, now)
		}
		if f := formOf(t, ids[k], storedRecords(t, s, ids[k])[ids[k]]); f.short || !f.noRunAt {
			t.Errorf("job %d: record %+v, want a long header with run-at \"\"", k, f)
		}
	}
}
