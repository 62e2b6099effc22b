package redis

import (
	"encoding/binary"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// oldFormat3Record is the record that format 3 wrote, before it had bare
// records and folded created times, for a pending job of defaults but
// its max attempts, type, payload and JID ("" for none), created d ms
// before its id's time: the short header, then a compact body of
// version 3 (4 with the JID) with its flags byte.
func oldFormat3Record(max int, typ, payload string, d int64, jid string) string {
	b := []byte("p" + strconv.Itoa(max) + "\n")
	v := byte(bodyCompact)
	if jid != "" {
		v = bodyCompactJID
	}
	b = append(b, v)
	b = appendStr(b, typ)
	b = appendStr(b, payload)
	if d == 0 {
		b = append(b, 0)
	} else {
		b = append(b, bodyCreated)
		b = binary.AppendVarint(b, d)
	}
	if jid != "" {
		b = append(b, jid...)
		b = append(b, byte(len(jid)>>8), byte(len(jid)))
	}
	return string(b)
}

// TestFormat3OldRecordsDecode: the records format 3 wrote before bare
// records (kept here as that writer wrote them) still decode, and
// claimedRecord claims them, as the jobs they were written for.
func TestFormat3OldRecordsDecode(t *testing.T) {
	t.Parallel()
	id := "01a21c82-ca73-7095-b100-000149691c79"
	idTime := time.UnixMilli(idMilli(id)).UTC()
	for _, c := range []struct {
		rec   string
		max   int
		back  time.Duration
		jid   string
		title string
	}{
		{"p25\n\x03\x01t\x02pl\x00", 25, 0, "", ""},
		{"p25\n\x04\x01t\x02pl\x00jid\x00\x03", 25, 0, "jid", ""},
		{"p25\n\x03\x01t\x02pl\x10\x0e", 25, 7 * time.Millisecond, "", ""},
		{"p25\n\x04\x01t\x02pl\x10\x0ejid\x00\x03", 25, 7 * time.Millisecond, "jid", ""},
		{"p25\n\x03\x01t\x02pl\x01\x01x", 25, 0, "", "x"},
		{"p3\n\x03\x01t\x02pl\x00", 3, 0, "", ""},
	} {
		if c.title == "" {
			if got := oldFormat3Record(c.max, "t", "pl", c.back.Milliseconds(), c.jid); got != c.rec {
				t.Errorf("oldFormat3Record = %q, want %q", got, c.rec)
			}
		}
		created := idTime.Add(-c.back)
		want := &backend.Job{ID: id, Queue: "q", Type: "t", Payload: []byte("pl"), State: backend.StatePending, MaxAttempts: c.max,
			RunAt: created, CreatedAt: created, Timeout: backend.DefaultTimeout, JID: c.jid, Title: c.title}
		got, err := decodeRecord(id, "q", c.rec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("record %q: %+v, %v; want %+v", c.rec, got, err, want)
		}
		claimed, ok := claimedRecord(c.rec, "1700000000500", "1700000060500", "77")
		if !ok {
			t.Fatalf("claimedRecord of %q failed", c.rec)
		}
		want.State, want.Attempt, want.LeaseToken, want.WorkerID = backend.StateActive, 1, 1, "w"
		want.StartedAt, want.LeaseExpiresAt = time.UnixMilli(1700000000500).UTC(), time.UnixMilli(1700000060500).UTC()
		if got, err := decodeRecord(id, "q", claimed); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("claimed record %q: %+v, %v; want %+v", claimed, got, err, want)
		}
	}
}

// TestFormat3OldRecordsScripts: in a store holding pending records as
// format 3 wrote them before bare records, beside bare ones, the scripts
// read both: Get, an enqueue of a JID either holds (a duplicate,
// pending), Delete (the JID freed), a claim of them in turn (its short
// way switching between the two forms), Release (each scored by its
// creation, as enqueued) and completion.
func TestFormat3OldRecordsScripts(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Now().Add(-time.Second).Truncate(time.Millisecond).UTC()
	var jobs []backend.NewJob
	for k := range 7 {
		nj := backend.NewJob{Type: "t", Queue: "q", Payload: []byte("pl")}
		if k%2 == 1 {
			nj.JID = "j" + strconv.Itoa(k) + "-" + testPrefix(t)
		}
		jobs = append(jobs, nj)
	}
	ids := enqueueIDs(t, s, now, jobs...)
	num, _ := queueNumOf(ids[0])
	qk := s.keys.queue(num)
	old := map[int]bool{0: true, 1: true, 3: true, 4: true}
	for k, id := range ids {
		rec := storedRecords(t, s, id)[id]
		if !isBare(rec) {
			t.Fatalf("job %d: record %q, want a bare one", k, rec)
		}
		if old[k] {
			rec = oldFormat3Record(25, "t", "pl", idMilli(id)-now.UnixMilli(), jobs[k].JID)
			if err := c.Do(ctx, c.B().Hset().Key(qk.jobs()).FieldValue().FieldValue(id, rec).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	scores := map[string]string{}
	for _, id := range ids {
		v, err := c.Do(ctx, c.B().Zscore().Key(qk.ready()).Member(id).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		scores[id] = v
	}
	check := func(step string, k int, j *backend.Job, state backend.State, attempt int) {
		t.Helper()
		if j.ID != ids[k] || j.State != state || j.Attempt != attempt || j.MaxAttempts != 25 || j.Type != "t" || string(j.Payload) != "pl" ||
			j.JID != jobs[k].JID || !j.CreatedAt.Equal(now) || !j.RunAt.Equal(now) || j.Timeout != backend.DefaultTimeout {
			t.Errorf("%s: job %d = %+v; want %s, attempt %d, as enqueued", step, k, j, state, attempt)
		}
	}
	for k, id := range ids {
		j, err := s.Get(ctx, backend.GetParams{ID: id})
		if err != nil {
			t.Fatalf("Get of job %d: %v", k, err)
		}
		check("get", k, j, backend.StatePending, 0)
	}
	// A JID held by an old record and by a bare one: a duplicate, pending.
	for _, k := range []int{1, 5} {
		d, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{jobs[k]}})
		if err != nil || !d.Jobs[0].Duplicate || d.Jobs[0].ID != ids[k] || d.Jobs[0].State != backend.StatePending {
			t.Errorf("Enqueue of job %d's JID = %+v, %v; want a duplicate of it, pending", k, d.Jobs, err)
		}
	}
	// Delete of an old record and of a bare one frees their JIDs.
	for _, k := range []int{3, 5} {
		if err := s.Delete(ctx, backend.DeleteParams{ID: ids[k], Now: now}); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Do(ctx, c.B().Hget().Key(qk.jids()).Field(jobs[k].JID).Build()).ToString(); !rueidis.IsRedisNil(err) {
			t.Errorf("jid index entry of job %d = %q, %v after Delete; want none", k, v, err)
		}
	}
	left := []int{0, 1, 2, 4, 6}
	claim := func(step string, attempt int) []backend.Lease {
		t.Helper()
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil || len(got.Jobs) != len(left) {
			t.Fatalf("%s: Claim = %d jobs, %v; want %d", step, len(got.Jobs), err, len(left))
		}
		var ls []backend.Lease
		for i, j := range got.Jobs {
			check(step, left[i], j, backend.StateActive, attempt)
			ls = append(ls, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
		}
		return ls
	}
	ls := claim("claim", 1)
	if r, err := s.Release(ctx, backend.ReleaseParams{Leases: ls, Now: now}); err != nil {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	for _, k := range left {
		v, err := c.Do(ctx, c.B().Zscore().Key(qk.ready()).Member(ids[k]).Build()).ToString()
		if err != nil || v != scores[ids[k]] {
			t.Errorf("released job %d scored %q, %v; want %s as enqueued", k, v, err, scores[ids[k]])
		}
	}
	ls = claim("claim again", 1) // a released attempt is given back
	var items []backend.CompleteItem
	for _, l := range ls {
		items = append(items, backend.CompleteItem{Lease: l})
	}
	if r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now}); err != nil {
		t.Fatalf("Complete = %+v, %v", r, err)
	}
	for _, k := range left {
		j, err := s.Get(ctx, backend.GetParams{ID: ids[k]})
		if err != nil {
			t.Fatal(err)
		}
		check("complete", k, j, backend.StateCompleted, 1)
	}
}

// TestClaimedRecordMatchesScript: the claimed record claimedRecord makes
// (for "enqueue claim", which writes a lone job claimed) is byte for
// byte the one the claim script writes, for pending records of every
// form: bare (of a body with flags, and of one without), short, long,
// and as format 3 wrote them before bare records.
func TestClaimedRecordMatchesScript(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	now := time.Now().Truncate(time.Millisecond).UTC()
	jobs := []backend.NewJob{
		{Type: "t", Queue: "q", Payload: []byte("p\n1")},
		{Type: "t", Queue: "q", Title: "title", JID: "j-" + testPrefix(t)},
		{Type: "t", Queue: "q", MaxAttempts: 3},
		{Type: "t", Queue: "q", Priority: 2},
		{Type: "t", Queue: "q"},
	}
	ids := enqueueIDs(t, s, now, jobs...)
	num, _ := queueNumOf(ids[0])
	jobsKey := s.keys.queue(num).jobs()
	old := oldFormat3Record(25, "t", "", idMilli(ids[4])-now.UnixMilli(), "")
	if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(ids[4], old).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	pending := storedRecords(t, s, ids...)
	if !isBare(pending[ids[0]]) || !isBare(pending[ids[1]]) {
		t.Fatalf("records %q and %q, want bare ones", pending[ids[0]], pending[ids[1]])
	}
	at := now.Add(time.Second)
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: at})
	if err != nil || len(got.Jobs) != len(ids) {
		t.Fatalf("Claim = %d jobs, %v; want %d", len(got.Jobs), err, len(ids))
	}
	claimed := storedRecords(t, s, ids...)
	nowMs, expMs := strconv.FormatInt(at.UnixMilli(), 10), strconv.FormatInt(at.Add(time.Minute).UnixMilli(), 10)
	for k, id := range ids {
		want, ok := claimedRecord(pending[id], nowMs, expMs, "77")
		if !ok || want != claimed[id] {
			t.Errorf("job %d: claimedRecord(%q) = %q, %v; the claim script wrote %q", k, pending[id], want, ok, claimed[id])
		}
	}
}
