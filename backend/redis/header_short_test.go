package redis

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestShortHeaderRoundTrip writes every job whose header the short form
// covers (any max attempts, and with or without what the body alone
// holds: title, timeout, tags, metadata, a JID, a created time other
// than the id's) with format 3's forms on (short header, compact body):
// its header is "p" and its max attempts, or none at all (a bare
// record) for bareMaxAttempts, and it reads back as it was, through the
// Go decoder and through claimedRecord, which writes the claimed record
// the claim script would. Each field that the short form does not
// cover, set to something else than its default, makes the header the
// long one.
func TestShortHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	id, err := newJobID(7)
	if err != nil {
		t.Fatal(err)
	}
	idTime := time.UnixMilli(idMilli(id)).UTC()
	bodies := []func(j *backend.Job){
		func(j *backend.Job) {},
		func(j *backend.Job) {
			j.Title, j.Timeout, j.UniqueFor = "title", 30*time.Minute, time.Second
			j.Tags, j.Metadata = []string{"a", "b"}, map[string]string{"k": "v"}
		},
		func(j *backend.Job) { j.JID = "jid" },
		func(j *backend.Job) { j.Payload = []byte("p|\n") },
	}
	for _, max := range []int{0, 1, 24, bareMaxAttempts, 1000000} {
		for _, created := range []time.Time{idTime, idTime.Add(-3 * time.Millisecond), idTime.Add(-maxFoldedCreated * time.Millisecond),
			idTime.Add(-(maxFoldedCreated + 1) * time.Millisecond), idTime.Add(time.Millisecond), idTime.Add(time.Hour)} {
			for bi, body := range bodies {
				j := &backend.Job{ID: id, Queue: "q", Type: "t", State: backend.StatePending, MaxAttempts: max, RunAt: created, CreatedAt: created}
				body(j)
				rec := string(appendRecord(nil, j, true))
				head, _ := recordHead(rec)
				wantHead := "p" + strconv.Itoa(max)
				if max == bareMaxAttempts {
					wantHead = ""
				}
				if head != wantHead || isBare(rec) != (wantHead == "") {
					t.Fatalf("max %d, created %v, body %d: header %q (bare %v), want %q", max, created, bi, head, isBare(rec), wantHead)
				}
				got, err := decodeRecord(id, "q", rec)
				if err != nil {
					t.Fatalf("max %d, created %v, body %d: %v", max, created, bi, err)
				}
				if !reflect.DeepEqual(got, j) {
					t.Errorf("max %d, created %v, body %d round trip:\n got  %+v\n want %+v", max, created, bi, got, j)
				}
				// The record long: the same job.
				long := encodeRecord(j)
				if got, err := decodeRecord(id, "q", long); err != nil || !reflect.DeepEqual(got, j) {
					t.Errorf("long record of max %d: %+v, %v; want %+v", max, got, err, j)
				}
				claimed, ok := claimedRecord(rec, "1700000000500", "1700000060500", "77")
				if !ok {
					t.Fatalf("claimedRecord of %q failed", rec)
				}
				c, err := decodeRecord(id, "q", claimed)
				want := *j
				want.State, want.Attempt, want.LeaseToken, want.WorkerID = backend.StateActive, 1, 1, "w"
				want.StartedAt, want.LeaseExpiresAt = time.UnixMilli(1700000000500).UTC(), time.UnixMilli(1700000060500).UTC()
				if err != nil || !reflect.DeepEqual(c, &want) {
					t.Errorf("claimed record %q: %+v, %v; want %+v", claimed, c, err, &want)
				}
			}
		}
	}

	now := idTime
	base := backend.Job{ID: id, Queue: "q", Type: "t", State: backend.StatePending, MaxAttempts: 25, RunAt: now, CreatedAt: now}
	long := []struct {
		name string
		set  func(j *backend.Job)
	}{
		{"scheduled", func(j *backend.Job) { j.State, j.RunAt = backend.StateScheduled, now.Add(time.Hour) }},
		{"retry", func(j *backend.Job) { j.State = backend.StateRetry }},
		{"active", func(j *backend.Job) {
			j.State, j.Attempt, j.LeaseToken, j.WorkerID = backend.StateActive, 1, 1, "w"
			j.StartedAt, j.LeaseExpiresAt = now, now.Add(time.Minute)
		}},
		{"completed", func(j *backend.Job) { j.State, j.FinishedAt = backend.StateCompleted, now }},
		{"attempt", func(j *backend.Job) { j.Attempt = 1 }},
		{"token", func(j *backend.Job) { j.LeaseToken = 1 }},
		{"priority", func(j *backend.Job) { j.Priority = 1 }},
		{"negative priority", func(j *backend.Job) { j.Priority = -1 }},
		{"negative max attempts", func(j *backend.Job) { j.MaxAttempts = -1 }},
		{"run-at after creation", func(j *backend.Job) { j.RunAt = now.Add(time.Millisecond) }},
		{"deadline", func(j *backend.Job) { j.Deadline = now.Add(time.Hour) }},
		{"lease", func(j *backend.Job) { j.LeaseExpiresAt = now.Add(time.Hour) }},
		{"started", func(j *backend.Job) { j.StartedAt = now }},
		{"finished", func(j *backend.Job) { j.FinishedAt = now }},
		{"worker", func(j *backend.Job) { j.WorkerID = "w" }},
		{"unique key", func(j *backend.Job) { j.UniqueKey = "u" }},
		{"retention none", func(j *backend.Job) { j.Retention = backend.RetainNone }},
		{"retention forever", func(j *backend.Job) { j.Retention = backend.RetainForever }},
		{"retention for", func(j *backend.Job) { j.Retention = backend.RetainFor(time.Hour) }},
		{"id not a uuid", func(j *backend.Job) { j.ID = "job-1" }},
	}
	for _, c := range long {
		j := base
		c.set(&j)
		rec := string(appendRecord(nil, &j, true))
		head, _, _ := strings.Cut(rec, "\n")
		if want, _, _ := strings.Cut(encodeRecord(&j), "\n"); head != want {
			t.Errorf("%s: header %q, want the long one %q", c.name, head, want)
		}
		if j.ID == id {
			if got, err := decodeRecord(id, "q", rec); err != nil || !reflect.DeepEqual(got, &j) {
				t.Errorf("%s: decoded %+v, %v; want %+v", c.name, got, err, &j)
			}
		}
	}
	// A cancel field makes it long too (an imported job's history).
	if rec := string(appendRecordCancel(nil, &base, "r", true)); isShortHeader(rec[:strings.IndexByte(rec, '\n')]) {
		t.Errorf("record with a cancel field %q has the short header", rec)
	}
	// Format 3's forms off (a store of format 2): the record as ever.
	if rec := string(appendRecord(nil, &base, false)); rec != encodeRecord(&base) {
		t.Errorf("record with short headers off = %q, want %q", rec, encodeRecord(&base))
	}
}

// TestShortHeaderCorrupt: headers that are neither form are reported as
// corrupt.
func TestShortHeaderCorrupt(t *testing.T) {
	t.Parallel()
	id, _ := newJobID(1)
	now := time.UnixMilli(idMilli(id)).UTC()
	j := &backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 25, RunAt: now, CreatedAt: now}
	rec := string(appendRecord(nil, j, true))
	if !isBare(rec) {
		t.Fatalf("record %q is not bare", rec)
	}
	body := rec
	for _, head := range []string{"p", "s25", "p-1", "p2x", "P25", "p 25", "a25", "p25|"} {
		if _, err := decodeRecord(id, "q", head+"\n"+body); err == nil {
			t.Errorf("header %q decoded", head)
		}
		if _, ok := claimedRecord(head+"\n"+body, "1", "2", "77"); ok {
			t.Errorf("header %q claimed", head)
		}
	}
	// Records with no header whose first byte is no body version, and
	// bare records whose body does not parse.
	for _, bad := range []string{"", "\x00" + rec[1:], string(rune(bodyLastVersion+1)) + rec[1:], rec[:1], rec[:len(rec)-1], rec + "x",
		"\x05\x01t\x00\x00\x01", "\x06\x01t\x00"} {
		if _, err := decodeRecord(id, "q", bad); err == nil {
			t.Errorf("record %q decoded", bad)
		}
	}
}

// TestCompactBodyRoundTrip writes a job with each combination of the
// fields a compact body may leave out set or left to its default, with
// and without a JID: the compact body's flags name the fields set, and
// the job reads back as it was, from the compact body and from the
// body of format 2.
func TestCompactBodyRoundTrip(t *testing.T) {
	t.Parallel()
	id, err := newJobID(7)
	if err != nil {
		t.Fatal(err)
	}
	idTime := time.UnixMilli(idMilli(id)).UTC()
	fields := []struct {
		bit byte
		set func(j *backend.Job)
	}{
		{bodyTitle, func(j *backend.Job) { j.Title = "title|\n" }},
		{bodyTimeout, func(j *backend.Job) { j.Timeout = 1500 * time.Microsecond }},
		{bodyUniqueFor, func(j *backend.Job) { j.UniqueFor = time.Hour }},
		{bodyRetention, func(j *backend.Job) { j.Retention = backend.RetainFor(time.Hour) }},
		{bodyCreated, func(j *backend.Job) { j.CreatedAt = idTime.Add(-2 * time.Second) }},
		{bodyTags, func(j *backend.Job) { j.Tags = []string{"a", ""} }},
		{bodyMetadata, func(j *backend.Job) { j.Metadata = map[string]string{"k": "v", "e": ""} }},
	}
	for mask := 0; mask < 1<<len(fields); mask++ {
		for _, jid := range []string{"", "jid|\n"} {
			j := &backend.Job{ID: id, Queue: "q", Type: "type", Payload: []byte{0, 1, 255}, State: backend.StateScheduled, MaxAttempts: 25,
				RunAt: idTime.Add(time.Hour), Timeout: backend.DefaultTimeout, CreatedAt: idTime, JID: jid}
			var want byte
			for i, f := range fields {
				if mask&(1<<i) != 0 {
					f.set(j)
					want |= f.bit
				}
			}
			if j.Retention != backend.RetainDefault {
				j.State = backend.StateCompleted // a retention of its own is in the header too
			}
			for _, f3 := range []bool{true, false} {
				rec := string(appendRecord(nil, j, f3))
				_, body, _ := strings.Cut(rec, "\n")
				body = body[len(j.UniqueKey):]
				version := byte(bodyVersion)
				if f3 {
					version = bodyCompact
					if want == 0 {
						version = bodyCompactDefaults
					}
				}
				if jid != "" {
					version++
				}
				if body[0] != version {
					t.Fatalf("mask %b, jid %q, f3 %v: body version %d, want %d", mask, jid, f3, body[0], version)
				}
				if at := 1 + 1 + len(j.Type) + 1 + len(j.Payload); f3 && want != 0 && body[at] != want {
					t.Errorf("mask %b, jid %q: flags %b, want %b", mask, jid, body[at], want)
				}
				got, err := decodeRecord(id, "q", rec)
				if err != nil {
					t.Fatalf("mask %b, jid %q, f3 %v: %v", mask, jid, f3, err)
				}
				if !reflect.DeepEqual(got, j) {
					t.Errorf("mask %b, jid %q, f3 %v round trip:\n got  %+v\n want %+v", mask, jid, f3, got, j)
				}
			}
		}
	}
	// Flags beyond the known ones are corrupt.
	j := &backend.Job{ID: id, Type: "t", State: backend.StatePending, MaxAttempts: 25, RunAt: idTime, Timeout: backend.DefaultTimeout, CreatedAt: idTime, Title: "x"}
	rec := []byte(string(appendRecord(nil, j, true)))
	if rec[0] != bodyCompact || rec[4] != bodyTitle {
		t.Fatalf("record %q is not bare with a title's flags", rec)
	}
	rec[4] |= 0x80
	if _, err := decodeRecord(id, "q", string(rec)); err == nil {
		t.Errorf("record %q with unknown flags decoded", rec)
	}
}

// TestCompactBodyCreatedFolded: a compact body whose fields after the
// payload are all defaults but its CreatedAt, 0 to maxFoldedCreated ms
// before the id's time, holds those ms in its version (bodyCompactDefaults
// plus twice them, plus one with a JID) with no flags byte; a CreatedAt
// further back, or after the id's time, or any other field set, takes
// the flags. Each reads back as it was, bare or with a header.
func TestCompactBodyCreatedFolded(t *testing.T) {
	t.Parallel()
	id, err := newJobID(7)
	if err != nil {
		t.Fatal(err)
	}
	idTime := time.UnixMilli(idMilli(id)).UTC()
	for ms := -2; ms <= maxFoldedCreated+2; ms++ {
		for _, jid := range []string{"", "jid"} {
			for _, max := range []int{bareMaxAttempts, 3} {
				for _, title := range []string{"", "t"} {
					created := idTime.Add(-time.Duration(ms) * time.Millisecond)
					j := &backend.Job{ID: id, Queue: "q", Type: "type", Payload: []byte("pay\nload"), State: backend.StatePending, MaxAttempts: max,
						RunAt: created, Timeout: backend.DefaultTimeout, CreatedAt: created, JID: jid, Title: title}
					rec := string(appendRecord(nil, j, true))
					_, body := recordHead(rec)
					want := byte(bodyCompact)
					if ms >= 0 && ms <= maxFoldedCreated && title == "" {
						want = bodyCompactDefaults + 2*byte(ms)
					}
					if jid != "" {
						want++
					}
					if body[0] != want {
						t.Errorf("created %d ms back, jid %q, max %d, title %q: version %d, want %d", ms, jid, max, title, body[0], want)
					}
					if isBare(rec) != (max == bareMaxAttempts) {
						t.Errorf("created %d ms back, max %d: bare %v", ms, max, isBare(rec))
					}
					got, err := decodeRecord(id, "q", rec)
					if err != nil || !reflect.DeepEqual(got, j) {
						t.Errorf("created %d ms back, jid %q, max %d, title %q round trip:\n got  %+v, %v\n want %+v", ms, jid, max, title, got, err, j)
					}
				}
			}
		}
	}
}
