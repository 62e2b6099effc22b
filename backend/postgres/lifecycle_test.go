package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// TestExpirySQL: the SQL that finishing statements use for a job's
// retention (effRetention, expiresAt, deleteNow) decides exactly as
// backend.Expiry over every kind of job retention, queue override, final
// state and result.
func TestExpirySQL(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2026, 11, 22, 1, 2, 3, 456000, time.UTC)
	retentions := []backend.Retention{
		backend.RetainDefault, backend.RetainNone, backend.RetainForever,
		backend.RetainFor(time.Hour), backend.RetainFor(math.MaxInt64), // past the time range: forever
	}
	// One queue per override, and one without settings.
	queues := map[string]backend.QueueRetention{"unset": {}}
	for i, r := range retentions {
		q := fmt.Sprintf("q%d", i)
		qr := backend.QueueRetention{Completed: r, Failed: r, Cancelled: r}
		queues[q] = qr
		if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: q, Retention: &qr, Now: now}); err != nil {
			t.Fatalf("UpdateQueue(%s): %v", q, err)
		}
	}
	eff := effRetention("$2::bigint", "$3::text", "$4::text")
	query := fill(`SELECT `+expiresAt("x.eff", "x.st")+`, `+deleteNow("x.eff", "x.st", "x.hr")+`
		FROM (SELECT `+eff+` AS eff, $4::text AS st, $5::boolean AS hr) x`, s.schema, s.finished)
	cases := 0
	for _, jr := range retentions {
		for q, qr := range queues {
			for _, st := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled} {
				for _, hasResult := range []bool{false, true} {
					wantAt, wantDel := backend.Expiry(jr, qr, st, now, hasResult)
					var at pgtype.Timestamptz
					var del bool
					if err := s.Pool().QueryRow(ctx, query, now, int64(jr), q, string(st), hasResult).Scan(&at, &del); err != nil {
						t.Fatalf("expiry SQL: %v", err)
					}
					// When the job is deleted, the expiry the SQL computes is
					// never stored.
					got := optTime(at)
					if del != wantDel || (!del && !got.Equal(wantAt)) {
						t.Errorf("job %v, queue %s (%+v), %s, result %v: SQL says at %v, delete %v; backend.Expiry says %v, %v",
							jr, q, qr, st, hasResult, got, del, wantAt, wantDel)
					}
					cases++
				}
			}
		}
	}
	if cases != len(retentions)*len(queues)*3*2 {
		t.Fatalf("compared %d cases", cases)
	}
}

// TestFinishNotifiesOnlyWatched: a job nobody watches ends without a
// NOTIFY on the finished channel; a watched one sends its id. The
// unwatched job commits first, so had it notified, its notification would
// come first (the server delivers them in commit order).
func TestFinishNotifiesOnlyWatched(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.finished}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, end := range []string{"complete", "fail", "delete"} {
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
			{Type: "t", Queue: "q", MaxAttempts: 1}, {Type: "t", Queue: "q", MaxAttempts: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		unwatched, watched := res.Jobs[0].ID, res.Jobs[1].ID
		c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 2, Lease: time.Minute, Now: now})
		if err != nil || len(c.Jobs) != 2 {
			t.Fatalf("Claim = %d jobs, %v; want 2", len(c.Jobs), err)
		}
		leases := map[string]backend.Lease{}
		for _, j := range c.Jobs {
			leases[j.ID] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
		}
		sub, err := s.WatchFinished(ctx, backend.WatchParams{IDs: []string{watched}})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{unwatched, watched} {
			var res backend.BatchResult
			switch end {
			case "complete":
				res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: leases[id]}}, Now: now})
			case "fail":
				res, err = s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: leases[id], Message: "boom"}}, Now: now})
			case "delete":
				res, err = s.Release(ctx, backend.ReleaseParams{Leases: []backend.Lease{leases[id]}, Now: now})
				if err == nil {
					err = s.Delete(ctx, backend.DeleteParams{ID: id, Now: now})
				}
			}
			if err != nil || (len(res.Errors) > 0 && res.Errors[0] != nil) {
				t.Fatalf("%s of %s: %v %v", end, id, err, res.Errors)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: no notification for the watched job: %v", end, err)
		}
		if n.Payload != watched {
			t.Fatalf("%s: first notification on %s names %s; want only the watched job %s (the unwatched one is %s)",
				end, n.Channel, n.Payload, watched, unwatched)
		}
		select {
		case <-sub.C:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the watch was not signalled", end)
		}
		sub.Close()
	}
}

// TestMigrateFromVersion1: a schema made by version 1 with jobs in it is
// migrated to the current version; the jobs keep their fields and their
// retention (delete_at is ExpiresAt), and the new operations work on them.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := testSchemaName(t)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.schema_versions (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`,
		strings.ReplaceAll(ms[0].sql, "{{schema}}", q),
		`INSERT INTO ` + q + `.schema_versions VALUES (1, '` + ms[0].name + `', now())`,
		// One completed job, kept until a time of its own, and one pending.
		`INSERT INTO ` + q + `.jobs (id, run_at, created_at, finished_at, delete_at, timeout_ns, max_attempts, priority, state, queue, type, payload, result, attempt, lease_token)
			VALUES ('019a0000-0000-7000-8000-000000000001', '2026-11-21T10:00:00Z', '2026-11-21T10:00:00Z', '2026-11-21T10:00:01Z',
				'2026-11-22T10:00:01Z', 0, 3, 0, 'completed', 'old', 't', '\x7b7d', '\x6f6b', 1, 1),
			('019a0000-0000-7000-8000-000000000002', '2026-11-21T10:00:00Z', '2026-11-21T10:00:00Z', NULL,
				NULL, 0, 3, 0, 'pending', 'old', 't', '\x7b7d', NULL, 0, 0)`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("make a version 1 schema: %v", err)
		}
	}
	if _, err := Open(ctx, url, Options{Schema: schema}); err == nil {
		t.Fatal("Open without AutoMigrate of a version 1 schema succeeded; want ErrNotMigrated")
	}
	from, to, err := Migrate(ctx, url, Options{Schema: schema})
	if err != nil || from != 1 || to != SchemaVersion() {
		t.Fatalf("Migrate = %d → %d, %v; want 1 → %d", from, to, err, SchemaVersion())
	}
	s, err := Open(ctx, url, Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	defer s.Close()
	done, err := s.Get(ctx, backend.GetParams{ID: "019a0000-0000-7000-8000-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC); !done.ExpiresAt.Equal(want) || string(done.Result) != "ok" {
		t.Fatalf("migrated job: ExpiresAt %v, Result %q; want %v, \"ok\"", done.ExpiresAt, done.Result, want)
	}
	if done.CancelRequested || done.Progress != nil || done.Logs != nil || done.LogsDropped != 0 {
		t.Fatalf("migrated job has lifecycle fields set: %+v", done)
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	st, err := s.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[backend.StateCompleted] != 1 || st.Queues[0].Counts[backend.StatePending] != 1 {
		t.Fatalf("Stats after migration = %+v, %v; want queue old with one completed and one pending job", st, err)
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: "019a0000-0000-7000-8000-000000000002", Now: now}); err != nil {
		t.Fatalf("Cancel of a migrated pending job: %v", err)
	}
	page, err := s.List(ctx, backend.ListParams{Queue: "old", State: backend.StateCancelled})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != "019a0000-0000-7000-8000-000000000002" {
		t.Fatalf("List of cancelled jobs after migration = %+v, %v", page, err)
	}
}

// TestCountersSharded: the per-minute counters of one minute in several
// shards are summed, and folding old minutes into the totals keeps them.
func TestCountersSharded(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	m := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO `+s.schema+`.counters (minute, shard, processed, failed)
		VALUES ($1, 3, 5, 1), ($1, 6, 2, 2), ($2, 0, 1, 0)`, m, m.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	now := m.Add(30 * time.Second)
	st, err := s.Stats(ctx, backend.StatsParams{Now: now, Minutes: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.MinuteCount{{Minute: m.Add(-time.Minute), Processed: 1}, {Minute: m, Processed: 7, Failed: 3}}
	if len(st.Minutes) != 2 || st.Minutes[0] != want[0] || st.Minutes[1] != want[1] || st.Processed != 8 || st.Failed != 3 {
		t.Fatalf("Stats = minutes %+v, totals %d/%d; want %+v, 8/3", st.Minutes, st.Processed, st.Failed, want)
	}
	later := now.Add(3 * backend.StatsHistory)
	if _, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: later}); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.counters`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	st, err = s.Stats(ctx, backend.StatsParams{Now: later, Minutes: 1})
	if err != nil || rows != 1 || st.Processed != 8 || st.Failed != 3 || st.Minutes[0].Processed != 0 {
		t.Fatalf("after folding: %d counter rows, totals %d/%d, minutes %+v, %v; want 1 row, 8/3, an empty minute", rows, st.Processed, st.Failed, st.Minutes, err)
	}
}

// TestListTypeAcrossChunks: a listing by type reads the rows in chunks;
// matches spread over several chunks are each listed once, in order.
func TestListTypeAcrossChunks(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now().UTC()
	var want []string
	for batch := range 3 {
		jobs := make([]backend.NewJob, listChunk)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "filler", Queue: "q"}
		}
		jobs[batch*300] = backend.NewJob{Type: "rare", Queue: "q"}
		jobs[len(jobs)-1] = backend.NewJob{Type: "rare", Queue: "q", Title: "Last of its batch"}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Jobs[batch*300].ID, res.Jobs[len(jobs)-1].ID)
	}
	for _, order := range []backend.ListOrder{backend.OldestFirst, backend.NewestFirst} {
		p := backend.ListParams{Type: "rare", Limit: 4, Order: order}
		var got []string
		for page := 0; page < 10; page++ {
			res, err := s.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range res.Jobs {
				got = append(got, j.ID)
			}
			if res.NextCursor == "" {
				break
			}
			p.Cursor = res.NextCursor
		}
		exp := append([]string(nil), want...)
		if order == backend.NewestFirst {
			for i, j := 0, len(exp)-1; i < j; i, j = i+1, j-1 {
				exp[i], exp[j] = exp[j], exp[i]
			}
		}
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			t.Fatalf("List(type rare, %s) = %v; want %v", order, got, exp)
		}
	}
	res, err := s.List(ctx, backend.ListParams{Search: "last of", Limit: 10})
	if err != nil || len(res.Jobs) != 3 || res.NextCursor != "" {
		t.Fatalf("List(search \"last of\") = %d jobs, cursor %q, %v; want 3 and no cursor", len(res.Jobs), res.NextCursor, err)
	}
}

// TestCompleteMixedBatch: one Complete call whose items take both ways,
// the lean statement (a plain completion, a RetainNone job with a result)
// and the general one (a cancel requested, a RetainNone job without a
// result, a lost lease), plus an id of no job, each with its own outcome.
func TestCompleteMixedBatch(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now()
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
		{Type: "t", Queue: "mixed"},
		{Type: "t", Queue: "mixed", Retention: backend.RetainNone},
		{Type: "t", Queue: "mixed"},
		{Type: "t", Queue: "mixed", Retention: backend.RetainNone},
		{Type: "t", Queue: "mixed"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"mixed"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	lease := map[string]backend.Lease{}
	for _, j := range claimed.Jobs {
		lease[j.ID] = backend.Lease{JobID: j.ID, Token: j.LeaseToken}
	}
	if len(lease) != 5 {
		t.Fatalf("claimed %d jobs; want 5", len(lease))
	}
	plain, noneResult, cancelled, noneEmpty, lost := res.Jobs[0].ID, res.Jobs[1].ID, res.Jobs[2].ID, res.Jobs[3].ID, res.Jobs[4].ID
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: cancelled, Now: now}); err != nil {
		t.Fatal(err)
	}
	stale := lease[lost]
	stale.Token++
	items := []backend.CompleteItem{
		{Lease: stale},
		{Lease: lease[cancelled]},
		{Lease: lease[plain], Result: []byte("r")},
		{Lease: backend.Lease{JobID: "00000000-0000-7000-8000-000000000000"}},
		{Lease: lease[noneEmpty]},
		{Lease: lease[noneResult], Result: []byte("kept a while")},
	}
	got, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{backend.ErrLeaseLost, nil, nil, backend.ErrNotFound, nil, nil}
	for i := range want {
		if !errors.Is(got.Errors[i], want[i]) {
			t.Errorf("item %d: %v; want %v", i, got.Errors[i], want[i])
		}
	}
	state := func(id string) backend.State {
		t.Helper()
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if errors.Is(err, backend.ErrNotFound) {
			return "deleted"
		}
		if err != nil {
			t.Fatal(err)
		}
		return j.State
	}
	for id, st := range map[string]backend.State{
		plain: backend.StateCompleted, noneResult: backend.StateCompleted, cancelled: backend.StateCancelled,
		noneEmpty: "deleted", lost: backend.StateActive,
	} {
		if g := state(id); g != st {
			t.Errorf("job %s is %s; want %s", id, g, st)
		}
	}
}

// TestEnqueueCopy: a batch large enough to go in by COPY, with and without
// unique keys and JIDs (the keyed one inside a transaction), stores every
// field as the INSERT of a small batch does.
func TestEnqueueCopy(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now().Truncate(time.Microsecond)
	for _, keyed := range []bool{false, true} {
		var jobs []backend.NewJob
		for i := range copyMinJobs + 5 {
			nj := backend.NewJob{Type: "t", Queue: "copy", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Title: fmt.Sprint("job ", i), Priority: i % 3}
			switch i % 4 {
			case 1:
				nj.Tags, nj.Metadata = []string{"a", "b"}, map[string]string{"k": "v"}
			case 2:
				nj.RunAt, nj.Deadline = now.Add(time.Hour), now.Add(2*time.Hour)
			case 3:
				nj.MaxAttempts, nj.Timeout, nj.Retention = 7, time.Minute, backend.RetainFor(time.Hour)
			}
			if keyed && i%5 == 0 {
				nj.UniqueKey, nj.UniqueFor = fmt.Sprint("key ", i), time.Minute
			}
			if keyed && i%3 == 0 {
				nj.JID = fmt.Sprint("jid ", i)
			}
			jobs = append(jobs, nj)
		}
		small := append([]backend.NewJob(nil), jobs[:copyMinJobs-1]...)
		for k := range small {
			if small[k].UniqueKey != "" {
				small[k].UniqueKey += " small"
			}
			if small[k].JID != "" {
				small[k].JID += " small"
			}
		}
		big, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: small})
		if err != nil {
			t.Fatal(err)
		}
		for i := range small {
			a, err := s.Get(ctx, backend.GetParams{ID: big.Jobs[i].ID})
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Get(ctx, backend.GetParams{ID: ref.Jobs[i].ID})
			if err != nil {
				t.Fatal(err)
			}
			b.ID, b.UniqueKey, b.JID = a.ID, jobs[i].UniqueKey, jobs[i].JID
			if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
				t.Errorf("keyed %v, job %d by COPY:\n%+v\nby INSERT:\n%+v", keyed, i, a, b)
			}
		}
	}
}

// TestWatchWakesPendingQueue: WatchFinished on a pending job wakes its
// queue's subscribers. Marking the job watched locks its row for a
// moment, and a claim then skips it (SKIP LOCKED) and finds nothing; the
// worker that asked waits for a wake-up, and without one the job would
// wait for its next poll. The job is enqueued by another store that is
// closed before this one listens, so no enqueue's wake-up reaches it.
func TestWatchWakesPendingQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	producer := openTestStore(t, Options{})
	res, err := producer.Enqueue(ctx, backend.EnqueueParams{Now: time.Now().UTC(),
		Jobs: []backend.NewJob{{Type: "t", Queue: "q", MaxAttempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	producer.Close()
	s := openTestStore(t, Options{Schema: producer.opts.Schema})
	sub, err := s.Subscribe(ctx, backend.SubscribeParams{Queues: []string{"q"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	watch, err := s.WatchFinished(ctx, backend.WatchParams{IDs: []string{res.Jobs[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	select {
	case <-sub.C:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchFinished on a pending job did not wake its queue")
	}
}
