package redis

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestBareRecordPaths: one queue holding pending jobs of every stored
// form side by side (bare records with a created time folded 0 and 29
// ms into their version, a short header for 24 and 26 max attempts, a
// created time 30 ms and -1 ms from the id's, which no version holds,
// records as format 3 wrote them before bare ones, a JID of the longest
// length, an empty payload, payloads that read as a header, a unique
// key, a priority below 0) keeps every job as enqueued through Get,
// List, Stats, a JID duplicate, Cancel, Delete, a pause, a claim of
// them all (in run-at order within each priority, as enqueued), Release
// (each scored as enqueued), a second claim, Fail with and without a
// backoff, Complete and lease recovery.
func TestBareRecordPaths(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	longJID := "J" + testPrefix(t)
	longJID += strings.Repeat("x", backend.MaxJID-len(longJID))
	type spec struct {
		nj   backend.NewJob
		back int64 // created this many ms before the id's time, unless old
		old  bool  // written as format 3 wrote it before bare records
	}
	specs := []spec{
		{nj: backend.NewJob{Type: "a"}, back: 0},
		{nj: backend.NewJob{Type: "b", Payload: []byte("x"), JID: longJID}, back: 29},
		{nj: backend.NewJob{Type: "c", Payload: []byte("p25\n\x05\x01c"), MaxAttempts: 24}, back: 29},
		{nj: backend.NewJob{Type: "d", Payload: []byte("p|0|25|0|0||||||||0|\n"), MaxAttempts: 26}, back: 30},
		{nj: backend.NewJob{Type: "a longer type", Payload: []byte("\x05\x01a")}, back: -1},
		{nj: backend.NewJob{Type: "f", JID: "j5-" + testPrefix(t)}, back: 7},
		{nj: backend.NewJob{Type: "g", Payload: []byte("pl"), JID: "j6-" + testPrefix(t)}, back: 3, old: true},
		{nj: backend.NewJob{Type: "h", Payload: []byte("pl")}, back: 0, old: true},
		{nj: backend.NewJob{Type: "u", UniqueKey: "uk-" + testPrefix(t)}, back: 12},
		{nj: backend.NewJob{Type: "n1", Priority: -5}, back: 1},
		{nj: backend.NewJob{Type: "n2", Priority: -5}, back: 1},
		{nj: backend.NewJob{Type: "n3", Priority: -5}, back: 1},
		{nj: backend.NewJob{Type: "i", Payload: []byte("pl")}, back: 2},
	}
	var jobs []backend.NewJob
	for _, sp := range specs {
		nj := sp.nj
		nj.Queue = "q"
		jobs = append(jobs, nj)
	}
	ids := enqueueIDs(t, s, now, jobs...)
	num, _ := queueNumOf(ids[0])
	qk := s.keys.queue(num)

	// Each job's record rewritten for its created time, as Enqueue writes
	// it for a job so made (or as format 3 wrote it before), and scored so.
	want := map[string]*backend.Job{}
	score := map[string]string{}
	for k, id := range ids {
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		j.CreatedAt = time.UnixMilli(idMilli(id) - specs[k].back).UTC()
		if j.Priority == 0 && j.UniqueKey == "" {
			j.RunAt = j.CreatedAt
		}
		rec := string(appendRecord(nil, j, true))
		if specs[k].old {
			rec = oldFormat3Record(25, j.Type, string(j.Payload), specs[k].back, j.JID)
		}
		sc := string(appendReadyScore(nil, j.Priority, j.RunAt.UnixMilli()))
		if err := c.Do(ctx, c.B().Hset().Key(qk.jobs()).FieldValue().FieldValue(id, rec).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Zadd().Key(qk.ready()).ScoreMember().ScoreMember(mustFloat(t, sc), id).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		want[id], score[id] = j, sc
	}
	recs := storedRecords(t, s, ids...)
	for k, wantBare := range []bool{true, true, false, false, true, true, false, false, false, false, false, false, true} {
		if isBare(recs[ids[k]]) != wantBare {
			t.Fatalf("job %d: record %q, bare %v", k, recs[ids[k]], !wantBare)
		}
	}
	for k, d := range []int64{0, 29, 29} {
		_, body := recordHead(recs[ids[k]])
		v := bodyCompactDefaults + 2*byte(d)
		if specs[k].nj.JID != "" {
			v++
		}
		if body[0] != v {
			t.Fatalf("job %d: body version %d, want %d", k, body[0], v)
		}
	}

	// same checks a job as read against the job as enqueued.
	same := func(step string, id string, got *backend.Job, state backend.State, attempt int) {
		t.Helper()
		w := want[id]
		if got.ID != id || got.State != state || got.Attempt != attempt || got.MaxAttempts != w.MaxAttempts || got.Type != w.Type ||
			got.JID != w.JID || got.UniqueKey != w.UniqueKey || got.Priority != w.Priority || !got.CreatedAt.Equal(w.CreatedAt) ||
			got.Timeout != w.Timeout || got.Title != w.Title || len(got.Tags) != 0 || len(got.Metadata) != 0 {
			t.Errorf("%s: job %d = %+v\nwant %s, attempt %d, as enqueued: %+v", step, slices.Index(ids, id), got, state, attempt, w)
		}
	}
	get := func(step string, id string, state backend.State, attempt int) *backend.Job {
		t.Helper()
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil {
			t.Fatalf("%s: Get(%d): %v", step, slices.Index(ids, id), err)
		}
		same(step, id, j, state, attempt)
		if string(j.Payload) != string(want[id].Payload) {
			t.Errorf("%s: job %d: payload %q, want %q", step, slices.Index(ids, id), j.Payload, want[id].Payload)
		}
		return j
	}
	for _, id := range ids {
		j := get("get", id, backend.StatePending, 0)
		if !j.RunAt.Equal(want[id].RunAt) {
			t.Errorf("get: job %d: run-at %v, want %v", slices.Index(ids, id), j.RunAt, want[id].RunAt)
		}
	}
	if j, err := s.Get(ctx, backend.GetParams{JID: longJID}); err != nil || j.ID != ids[1] {
		t.Errorf("Get by the longest JID = %v, %v; want job 1", j, err)
	}
	lr, err := s.List(ctx, backend.ListParams{Queue: "q", State: backend.StatePending, Limit: 100})
	if err != nil || len(lr.Jobs) != len(ids) {
		t.Fatalf("List = %d jobs, %v; want %d", len(lr.Jobs), err, len(ids))
	}
	for _, j := range lr.Jobs {
		same("list", j.ID, j, backend.StatePending, 0)
	}
	st, err := s.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[backend.StatePending] != int64(len(ids)) {
		t.Fatalf("Stats = %+v, %v; want %d pending", st.Queues, err, len(ids))
	}
	oldest := want[ids[0]].RunAt
	for _, w := range want {
		if w.RunAt.Before(oldest) {
			oldest = w.RunAt
		}
	}
	if o := st.Queues[0].OldestPending; !o.Equal(oldest) {
		t.Errorf("Stats: oldest pending %v, want %v", o, oldest)
	}

	// Imported into another store (as kyu copy does), every job reads the
	// same there.
	var whole []*backend.Job
	for _, id := range ids {
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, j)
	}
	s2 := openTest(t, "")
	if ir, err := s2.Import(ctx, backend.ImportParams{Jobs: whole, Now: now}); err != nil {
		t.Fatal(err)
	} else {
		for k, it := range ir.Items {
			if it.Outcome != backend.ImportCreated {
				t.Fatalf("import of job %d: %+v", k, it)
			}
		}
	}
	for k, id := range ids {
		j, err := s2.Get(ctx, backend.GetParams{ID: id})
		if err != nil || !j.RunAt.Equal(want[id].RunAt) || string(j.Payload) != string(want[id].Payload) {
			t.Fatalf("imported job %d = %+v, %v", k, j, err)
		}
		same("import", id, j, backend.StatePending, 0)
	}

	// A JID a bare record holds: a duplicate, pending, from its queue and
	// from another.
	for _, q := range []string{"q", "elsewhere"} {
		r, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "dup", Queue: q, JID: longJID}}})
		if err != nil || !r.Jobs[0].Duplicate || r.Jobs[0].ID != ids[1] || r.Jobs[0].State != backend.StatePending {
			t.Fatalf("enqueue of job 1's JID in queue %s = %+v, %v; want a duplicate of it, pending", q, r, err)
		}
	}
	for _, k := range []int{1, 6} {
		r, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "dup", Queue: "q", JID: specs[k].nj.JID}}})
		if err != nil || !r.Jobs[0].Duplicate || r.Jobs[0].ID != ids[k] || r.Jobs[0].State != backend.StatePending {
			t.Fatalf("enqueue of job %d's JID = %+v, %v; want a duplicate of it, pending", k, r, err)
		}
	}
	// Cancel of a bare job; Delete of a bare job with a JID frees its JID.
	if j, err := s.Cancel(ctx, backend.CancelParams{ID: ids[0], Now: now}); err != nil {
		t.Fatal(err)
	} else {
		same("cancel", ids[0], j, backend.StateCancelled, 0)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: ids[5], Now: now}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "again", Queue: "other", JID: specs[5].nj.JID}}})
	if err != nil || r.Jobs[0].Duplicate {
		t.Fatalf("enqueue of the deleted job's JID = %+v, %v; want a new job", r, err)
	}
	live := slices.Clone(ids)
	live = slices.DeleteFunc(live, func(id string) bool { return id == ids[0] || id == ids[5] })

	// Paused, the queue hands out nothing and changes nothing.
	paused, resumed := true, false
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "q", Paused: &paused, Now: now}); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Second)
	claimAll := func(step string, at time.Time, lease time.Duration) []*backend.Job {
		t.Helper()
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 100, Lease: lease, WorkerID: "w", Now: at})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return got.Jobs
	}
	if got := claimAll("paused claim", at, time.Minute); len(got) != 0 {
		t.Fatalf("claim of a paused queue took %d jobs", len(got))
	}
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "q", Paused: &resumed, Now: now}); err != nil {
		t.Fatal(err)
	}

	// The order of a claim: priority, then run-at, then id.
	order := slices.Clone(live)
	slices.SortStableFunc(order, func(a, b string) int {
		sa, _ := strconv.ParseInt(score[a], 10, 64)
		sb, _ := strconv.ParseInt(score[b], 10, 64)
		if sa != sb {
			return int(sa - sb)
		}
		return strings.Compare(a, b)
	})
	claimed := func(step string, got []*backend.Job, attempt int) []backend.Lease {
		t.Helper()
		var gotIDs []string
		var ls []backend.Lease
		for _, j := range got {
			gotIDs = append(gotIDs, j.ID)
			same(step, j.ID, j, backend.StateActive, attempt)
			ls = append(ls, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
		}
		if !slices.Equal(gotIDs, order) {
			t.Fatalf("%s: claimed %v,\nwant %v", step, gotIDs, order)
		}
		return ls
	}
	ls := claimed("claim 1", claimAll("claim 1", at, time.Minute), 1)
	for _, id := range live {
		get("claim 1", id, backend.StateActive, 1)
	}
	if r, err := s.Release(ctx, backend.ReleaseParams{Leases: ls, Now: at}); err != nil || slices.ContainsFunc(r.Errors, func(e error) bool { return e != nil }) {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	for _, id := range live {
		get("release", id, backend.StatePending, 0)
		v, err := c.Do(ctx, c.B().Zscore().Key(qk.ready()).Member(id).Build()).ToString()
		if err != nil || v != score[id] {
			t.Errorf("release: job %d scored %s, %v; want %s, as enqueued", slices.Index(ids, id), v, err, score[id])
		}
	}

	// Claimed again: the first half fails with a backoff, the next with
	// none, the next completes; the last two are left to lease recovery.
	at = at.Add(time.Second)
	ls = claimed("claim 2", claimAll("claim 2", at, time.Second), 1)
	var fails []backend.FailItem
	for i, l := range ls[:len(ls)-2] {
		if i%3 == 2 {
			continue
		}
		fi := backend.FailItem{Lease: l, Message: "no"}
		if i%3 == 0 {
			fi.RetryAt = at.Add(time.Minute)
		}
		fails = append(fails, fi)
	}
	if r, err := s.Fail(ctx, backend.FailParams{Items: fails, Now: at}); err != nil || slices.ContainsFunc(r.Errors, func(e error) bool { return e != nil }) {
		t.Fatalf("Fail = %+v, %v", r, err)
	}
	var items []backend.CompleteItem
	for i, l := range ls[:len(ls)-2] {
		if i%3 == 2 {
			items = append(items, backend.CompleteItem{Lease: l})
		}
	}
	if r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: at}); err != nil || slices.ContainsFunc(r.Errors, func(e error) bool { return e != nil }) {
		t.Fatalf("Complete = %+v, %v", r, err)
	}
	if _, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: at.Add(time.Hour), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		state := map[int]backend.State{0: backend.StateRetry, 1: backend.StatePending, 2: backend.StateCompleted}[i%3]
		if i >= len(ls)-2 {
			state = backend.StatePending // recovered, or retry: either leaves the attempt
			if j, err := s.Get(ctx, backend.GetParams{ID: l.JobID}); err == nil && j.State == backend.StateRetry {
				state = backend.StateRetry
			}
		}
		get("end", l.JobID, state, 1)
	}
}

// mustFloat is the number s as a float64 (a ready score, exact).
func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestIDCollisionLeanClaimed: the lean enqueue script, sent again after
// a worker claimed the bare jobs it wrote (its reply lost), takes each
// id for the same job (its claimed record's tail is the bare record),
// not a collision, and writes nothing; a record of another job under
// one of those ids is a collision.
func TestIDCollisionLeanClaimed(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "first", Queue: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	p := backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "a", Queue: "q"}, {Type: "b", Queue: "q"}}}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	g := &enqueueGroup{name: "q", num: num, pos: []int{0, 1}}
	if err := s.buildEnqueue(ctx, g, &p); err != nil {
		t.Fatal(err)
	}
	if !g.lean {
		t.Fatal("plain pending jobs do not go by the lean script")
	}
	run := func() []int64 { return runLean(t, s, g, num) }
	if got := run(); got != nil {
		t.Fatalf("lean enqueue: outcomes %v, want a bare 0", got)
	}
	ids := []string{g.args[enqueueHead], g.args[enqueueHead+enqueueStride]}
	for id, rec := range storedRecords(t, s, ids...) {
		if !isBare(rec) {
			t.Fatalf("job %s: record %q, want a bare one", id, rec)
		}
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: now.Add(time.Second)})
	if err != nil || len(got.Jobs) != 3 {
		t.Fatalf("Claim = %d jobs, %v; want 3", len(got.Jobs), err)
	}
	if got := run(); got != nil {
		t.Fatalf("lean enqueue again after the claim: outcomes %v, want a bare 0 (the same jobs)", got)
	}
	for _, id := range ids {
		if j, err := s.Get(ctx, backend.GetParams{ID: id}); err != nil || j.State != backend.StateActive {
			t.Fatalf("Get after enqueueing a claimed job again = %+v, %v; want it still active", j, err)
		}
	}
	if again, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, Now: now.Add(time.Second)}); err != nil || len(again.Jobs) != 0 {
		t.Fatalf("Claim after enqueueing claimed jobs again = %d jobs, %v; want none", len(again.Jobs), err)
	}
	g.args[enqueueHead+enqueueStride] = res.Jobs[0].ID // another job's id: the first one's, claimed too
	if got := run(); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("lean enqueue over another job's id: outcomes %v, want [0 2]", got)
	}
}
