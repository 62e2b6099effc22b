package backendtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testEnqueue(t *testing.T, factory Factory) {
	t.Run("Defaults", func(t *testing.T) {
		f := start(t, factory)
		res, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: testType}}, Now: f.now})
		if err != nil {
			t.Fatalf("Enqueue of a job with only a type: %v", err)
		}
		if len(res.Jobs) != 1 || res.Jobs[0].ID == "" || res.Jobs[0].Duplicate || res.Jobs[0].State != backend.StatePending {
			t.Fatalf("Enqueue result = %+v; want one new pending job with an id", res.Jobs)
		}
		j := f.get(res.Jobs[0].ID)
		if j.ID != res.Jobs[0].ID {
			t.Errorf("Get returned id %q; want %q", j.ID, res.Jobs[0].ID)
		}
		if j.Queue != backend.DefaultQueue {
			t.Errorf("Queue = %q; want the default %q", j.Queue, backend.DefaultQueue)
		}
		if j.MaxAttempts != backend.DefaultMaxAttempts {
			t.Errorf("MaxAttempts = %d; want the default %d", j.MaxAttempts, backend.DefaultMaxAttempts)
		}
		if j.Timeout != backend.DefaultTimeout {
			t.Errorf("Timeout = %s; want the default %s", j.Timeout, backend.DefaultTimeout)
		}
		if j.State != backend.StatePending || j.Attempt != 0 || j.Priority != 0 || j.Retention != backend.RetainDefault {
			t.Errorf("State, Attempt, Priority, Retention = %q, %d, %d, %s; want pending, 0, 0, default", j.State, j.Attempt, j.Priority, j.Retention)
		}
		f.wantTime("RunAt of a job without one", j.RunAt, f.now)
		f.wantTime("CreatedAt", j.CreatedAt, f.now)
		for what, tm := range map[string]time.Time{"StartedAt": j.StartedAt, "FinishedAt": j.FinishedAt, "Deadline": j.Deadline, "LeaseExpiresAt": j.LeaseExpiresAt} {
			if !tm.IsZero() {
				t.Errorf("%s of a new job = %s; want zero", what, stamp(tm))
			}
		}
		if len(j.Errors) != 0 || len(j.Result) != 0 || j.CancelReason != "" || j.WorkerID != "" {
			t.Errorf("a new job carries errors %v, result %q, cancel reason %q or worker %q; want none", j.Errors, j.Result, j.CancelReason, j.WorkerID)
		}
	})

	t.Run("FieldsRoundTrip", func(t *testing.T) {
		f := start(t, factory)
		nj := backend.NewJob{
			Type:        "mail.send",
			Queue:       f.queue,
			Payload:     []byte(`{"to":"ada@example.com","n":1}`),
			Title:       "Mail to Ada",
			Priority:    7,
			RunAt:       f.now.Add(90 * time.Second),
			MaxAttempts: 3,
			Timeout:     45 * time.Second,
			Deadline:    f.now.Add(2 * time.Hour),
			UniqueKey:   "mail:ada",
			UniqueFor:   10 * time.Minute,
			Tags:        []string{"mail", "vip"},
			Metadata:    map[string]string{"tenant": "acme", "trace": "abc123"},
			Retention:   backend.RetainFor(36 * time.Hour),
		}
		r := f.enqueue(nj)[0]
		if r.Duplicate || r.State != backend.StateScheduled {
			t.Fatalf("Enqueue of a job with RunAt in the future = %+v; want a new scheduled job", r)
		}
		j := f.get(r.ID)
		if j.Type != nj.Type || j.Queue != nj.Queue || j.Title != nj.Title || j.Priority != nj.Priority {
			t.Errorf("Type, Queue, Title, Priority = %q, %q, %q, %d; want %q, %q, %q, %d",
				j.Type, j.Queue, j.Title, j.Priority, nj.Type, nj.Queue, nj.Title, nj.Priority)
		}
		if !bytes.Equal(j.Payload, nj.Payload) {
			t.Errorf("Payload = %q; want %q", j.Payload, nj.Payload)
		}
		if j.State != backend.StateScheduled || j.MaxAttempts != 3 || j.Timeout != 45*time.Second {
			t.Errorf("State, MaxAttempts, Timeout = %q, %d, %s; want scheduled, 3, 45s", j.State, j.MaxAttempts, j.Timeout)
		}
		if j.UniqueKey != nj.UniqueKey || j.UniqueFor != nj.UniqueFor || j.Retention != nj.Retention {
			t.Errorf("UniqueKey, UniqueFor, Retention = %q, %s, %s; want %q, %s, %s",
				j.UniqueKey, j.UniqueFor, j.Retention, nj.UniqueKey, nj.UniqueFor, nj.Retention)
		}
		if !slices.Equal(j.Tags, nj.Tags) {
			t.Errorf("Tags = %q; want %q", j.Tags, nj.Tags)
		}
		if !maps.Equal(j.Metadata, nj.Metadata) {
			t.Errorf("Metadata = %v; want %v", j.Metadata, nj.Metadata)
		}
		f.wantTime("RunAt", j.RunAt, nj.RunAt)
		f.wantTime("Deadline", j.Deadline, nj.Deadline)
		f.wantTime("CreatedAt", j.CreatedAt, f.now)
	})

	t.Run("StateByRunAt", func(t *testing.T) {
		f := start(t, factory)
		cases := []struct {
			name  string
			runAt time.Time
			want  backend.State
		}{
			{"zero", time.Time{}, backend.StatePending},
			{"past", f.now.Add(-time.Hour), backend.StatePending},
			{"now", f.now, backend.StatePending},
			{"1ms ahead", f.now.Add(time.Millisecond), backend.StateScheduled},
			{"1h ahead", f.now.Add(time.Hour), backend.StateScheduled},
		}
		for _, c := range cases {
			r := f.enqueue(backend.NewJob{RunAt: c.runAt})[0]
			if r.State != c.want {
				t.Errorf("Enqueue with RunAt %s reported %q; want %q", c.name, r.State, c.want)
			}
			j := f.get(r.ID)
			if j.State != c.want {
				t.Errorf("job with RunAt %s is %q; want %q", c.name, j.State, c.want)
			}
			want := c.runAt
			if c.want == backend.StatePending {
				want = f.now // a job due at once runs at Now
			}
			f.wantTime("RunAt "+c.name, j.RunAt, want)
		}
	})

	t.Run("Batch", func(t *testing.T) {
		f := start(t, factory)
		res := f.enqueue(backend.NewJob{Title: "a"}, backend.NewJob{Title: "b"}, backend.NewJob{Title: "c", RunAt: f.now.Add(time.Minute)})
		seen := map[string]bool{}
		for i, r := range res {
			if seen[r.ID] {
				t.Fatalf("batch result %d repeats id %s", i, r.ID)
			}
			seen[r.ID] = true
			if want := string(rune('a' + i)); f.get(r.ID).Title != want {
				t.Errorf("batch result %d is the job titled %q; want %q (results follow the jobs' order)", i, f.get(r.ID).Title, want)
			}
		}
		if res[2].State != backend.StateScheduled {
			t.Errorf("third item reported %q; want scheduled", res[2].State)
		}
	})

	t.Run("EmptyPayload", func(t *testing.T) {
		f := start(t, factory)
		for name, p := range map[string][]byte{"nil": nil, "empty": {}} {
			j := f.get(f.enqueueOne(backend.NewJob{Payload: p}))
			if len(j.Payload) != 0 {
				t.Errorf("%s payload came back as %q; want empty", name, j.Payload)
			}
		}
	})

	t.Run("LargePayload", func(t *testing.T) {
		f := start(t, factory)
		p := make([]byte, 1<<20)
		rand.Read(p)
		id := f.enqueueOne(backend.NewJob{Payload: p})
		if got := f.get(id).Payload; !bytes.Equal(got, p) {
			t.Fatalf("1 MiB random payload came back as %d bytes, not byte for byte the same", len(got))
		}
		j := f.claimOne()
		if !bytes.Equal(j.Payload, p) {
			t.Fatalf("1 MiB random payload came back from Claim as %d bytes, not byte for byte the same", len(j.Payload))
		}
	})

	t.Run("PayloadLimit", func(t *testing.T) {
		f := start(t, factory)
		// Exactly MaxPayload is allowed.
		p := backend.EnqueueParams{Jobs: []backend.NewJob{f.fill(backend.NewJob{Payload: bytes.Repeat([]byte("x"), 16)})}, Now: f.now, MaxPayload: 16}
		if _, err := f.b.Enqueue(f.ctx, p); err != nil {
			t.Fatalf("Enqueue of a payload of exactly MaxPayload bytes: %v", err)
		}
		p.Jobs[0].Payload = bytes.Repeat([]byte("x"), 17)
		_, err := f.b.Enqueue(f.ctx, p)
		wantInvalid(t, err, 0, "payload")
	})

	t.Run("CallerOwnsBuffers", func(t *testing.T) {
		f := start(t, factory)
		nj := backend.NewJob{Payload: []byte("original"), Tags: []string{"t"}, Metadata: map[string]string{"k": "v"}}
		id := f.enqueueOne(nj)
		nj.Payload[0], nj.Tags[0], nj.Metadata["k"] = 'X', "changed", "changed"
		j := f.get(id)
		j.Payload[0], j.Tags[0], j.Metadata["k"] = 'Y', "changed", "changed"
		j = f.get(id)
		if string(j.Payload) != "original" || j.Tags[0] != "t" || j.Metadata["k"] != "v" {
			t.Fatalf("job changed when the caller changed its own buffers (payload %q, tags %q, metadata %v); "+
				"a store must copy what it is given and what it returns", j.Payload, j.Tags, j.Metadata)
		}
	})
}

// wantInvalid checks that err is a *backend.ValidationError for index and field.
func wantInvalid(t *testing.T, err error, index int, field string) {
	t.Helper()
	var ve *backend.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error = %v; want a *backend.ValidationError for %s", err, field)
	}
	if ve.Field != field || ve.Index != index {
		t.Fatalf("ValidationError names item %d field %q (%v); want item %d field %q", ve.Index, ve.Field, err, index, field)
	}
}

// tags returns n distinct tags of size bytes each (size >= 1).
func tags(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(string(rune('a'+i%26)), size-1) + string(rune('A'+i/26))
	}
	return out
}

func testValidation(t *testing.T, factory Factory) {
	long := func(n int) string { return strings.Repeat("k", n) }
	cases := []struct {
		name  string
		field string
		job   backend.NewJob
	}{
		{"EmptyType", "type", backend.NewJob{Type: "", Queue: "q"}},
		{"LongType", "type", backend.NewJob{Type: long(257), Queue: "q"}},
		{"QueueChars", "queue", backend.NewJob{Type: testType, Queue: "no spaces!"}},
		{"LongQueue", "queue", backend.NewJob{Type: testType, Queue: long(129)}},
		{"PriorityHigh", "priority", backend.NewJob{Type: testType, Queue: "q", Priority: backend.MaxPriority + 1}},
		{"PriorityLow", "priority", backend.NewJob{Type: testType, Queue: "q", Priority: backend.MinPriority - 1}},
		{"PayloadOverDefault", "payload", backend.NewJob{Type: testType, Queue: "q", Payload: make([]byte, backend.DefaultMaxPayload+1)}},
		{"MaxAttempts", "max_attempts", backend.NewJob{Type: testType, Queue: "q", MaxAttempts: -1}},
		{"Timeout", "timeout", backend.NewJob{Type: testType, Queue: "q", Timeout: -time.Second}},
		{"DeadlineBeforeRunAt", "deadline", backend.NewJob{Type: testType, Queue: "q", RunAt: t0.Add(2 * time.Hour), Deadline: t0.Add(time.Hour)}},
		{"DeadlineAtRunAt", "deadline", backend.NewJob{Type: testType, Queue: "q", RunAt: t0.Add(time.Hour), Deadline: t0.Add(time.Hour)}},
		{"DeadlinePassed", "deadline", backend.NewJob{Type: testType, Queue: "q", Deadline: t0.Add(-time.Second)}},
		{"RunAtOutOfRange", "run_at", backend.NewJob{Type: testType, Queue: "q", RunAt: time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"NegativeUniqueFor", "unique_for", backend.NewJob{Type: testType, Queue: "q", UniqueKey: "k", UniqueFor: -time.Second}},
		{"UniqueForWithoutKey", "unique_for", backend.NewJob{Type: testType, Queue: "q", UniqueFor: time.Hour}},
		{"LongUniqueKey", "unique_key", backend.NewJob{Type: testType, Queue: "q", UniqueKey: long(1025)}},
		{"Retention", "retention", backend.NewJob{Type: testType, Queue: "q", Retention: backend.Retention(-3)}},
		{"TypeNUL", "type", backend.NewJob{Type: "a\x00b", Queue: "q"}},
		{"TitleNotUTF8", "title", backend.NewJob{Type: testType, Queue: "q", Title: "caf\xe9"}},
		{"UniqueKeyNUL", "unique_key", backend.NewJob{Type: testType, Queue: "q", UniqueKey: "k\x00"}},
		{"TagNUL", "tags", backend.NewJob{Type: testType, Queue: "q", Tags: []string{"ok", "\x00"}}},
		{"MetadataNUL", "metadata", backend.NewJob{Type: testType, Queue: "q", Metadata: map[string]string{"k": "v\x00"}}},
		{"LongTitle", "title", backend.NewJob{Type: testType, Queue: "q", Title: long(backend.MaxTitle + 1)}},
		{"ManyTags", "tags", backend.NewJob{Type: testType, Queue: "q", Tags: tags(backend.MaxTags+1, 1)}},
		{"LongTag", "tags", backend.NewJob{Type: testType, Queue: "q", Tags: []string{"ok", long(backend.MaxTag + 1)}}},
		{"LargeMetadata", "metadata", backend.NewJob{Type: testType, Queue: "q", Metadata: map[string]string{"k": long(backend.MaxMetadata - 1), "j": "v"}}},
		{"TypeNotUTF8", "type", backend.NewJob{Type: "a\xff", Queue: "q"}},
		{"QueueNotUTF8", "queue", backend.NewJob{Type: testType, Queue: "q\xff"}},
		{"UniqueKeyNotUTF8", "unique_key", backend.NewJob{Type: testType, Queue: "q", UniqueKey: "k\xc3\x28"}},
		{"TagNotUTF8", "tags", backend.NewJob{Type: testType, Queue: "q", Tags: []string{"ok", "\xed\xa0\x80"}}},
		{"MetadataKeyNotUTF8", "metadata", backend.NewJob{Type: testType, Queue: "q", Metadata: map[string]string{"k\xff": "v"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, factory)
			// The bad job sits between two good ones in f.queue; none may be written.
			bad := c.job
			if bad.Queue == "q" {
				bad.Queue = f.queue
			}
			good := f.fill(backend.NewJob{UniqueKey: "good"})
			_, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Jobs: []backend.NewJob{good, bad, f.fill(backend.NewJob{})}, Now: f.now})
			wantInvalid(t, err, 1, c.field)
			f.claimNothing("a batch with an invalid item must write nothing")
			if r := f.enqueue(good)[0]; r.Duplicate {
				t.Fatalf("unique key of the refused batch is held by %s; a refused batch must write nothing", r.ID)
			}
		})
	}

	t.Run("Limits", func(t *testing.T) {
		f := start(t, factory)
		// The edges of every rule are accepted.
		f.enqueue(
			backend.NewJob{Type: long(256)},
			backend.NewJob{Queue: long(128)},
			backend.NewJob{Queue: "a.B_c:d-9"},
			backend.NewJob{Priority: backend.MaxPriority},
			backend.NewJob{Priority: backend.MinPriority},
			backend.NewJob{MaxAttempts: 1},
			backend.NewJob{RunAt: f.now.Add(time.Hour), Deadline: f.now.Add(time.Hour + time.Millisecond)},
			backend.NewJob{Deadline: f.now.Add(time.Millisecond)},
			backend.NewJob{UniqueKey: long(1024)},
			backend.NewJob{Retention: backend.RetainNone},
			backend.NewJob{Retention: backend.RetainForever},
			backend.NewJob{Title: long(backend.MaxTitle)},
			backend.NewJob{Tags: tags(backend.MaxTags, backend.MaxTag)},
			backend.NewJob{Metadata: map[string]string{"k": long(backend.MaxMetadata - 2), "j": ""}},
		)
	})

	t.Run("ZeroNow", func(t *testing.T) {
		f := start(t, factory)
		_, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Jobs: []backend.NewJob{f.fill(backend.NewJob{})}})
		wantInvalid(t, err, -1, "now")
		f.claimNothing("an enqueue without the caller's clock must write nothing")
	})
}

// testParamChecks proves that Claim, Heartbeat and Fail refuse parameters
// that fail their Check, changing nothing.
func testParamChecks(t *testing.T, factory Factory) {
	t.Run("ClaimLease", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		for _, lease := range []time.Duration{0, -time.Second, 250 * 365 * 24 * time.Hour} {
			_, err := f.b.Claim(f.ctx, backend.ClaimParams{Queues: []string{f.queue}, Max: 1, Lease: lease, Now: f.now})
			wantInvalid(t, err, -1, "lease")
		}
		f.claimOne()
	})
	t.Run("ClaimQueueName", func(t *testing.T) {
		f := start(t, factory)
		_, err := f.b.Claim(f.ctx, backend.ClaimParams{Queues: []string{"no spaces"}, Max: 1, Lease: testLease, Now: f.now})
		wantInvalid(t, err, -1, "queues")
	})
	t.Run("HeartbeatExtend", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		before := f.get(j.ID)
		for _, extend := range []time.Duration{0, -time.Second} {
			_, err := f.b.Heartbeat(f.ctx, backend.HeartbeatParams{Leases: []backend.Lease{lease(j)}, Extend: extend, Now: f.now})
			wantInvalid(t, err, -1, "extend")
		}
		f.unchanged(before, "a refused heartbeat changes nothing")
	})
	t.Run("FailRetryAt", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		before := f.get(j.ID)
		_, err := f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{{Lease: lease(j), Message: "x", RetryAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}}, Now: f.now})
		wantInvalid(t, err, 0, "retry_at")
		f.unchanged(before, "a refused Fail changes nothing")
	})
	t.Run("FailText", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueOne(backend.NewJob{})
		j := f.claimOne()
		before := f.get(j.ID)
		for _, c := range []struct {
			field string
			item  backend.FailItem
		}{
			{"message", backend.FailItem{Lease: lease(j), Message: "bad \xff"}},
			{"message", backend.FailItem{Lease: lease(j), Message: "nul \x00"}},
			{"stack", backend.FailItem{Lease: lease(j), Message: "x", Stack: "main.go:1 \xc3\x28"}},
			{"message", backend.FailItem{Lease: lease(j), Message: strings.Repeat("m", backend.MaxFailMessage+1)}},
			{"stack", backend.FailItem{Lease: lease(j), Message: "x", Stack: strings.Repeat("s", backend.MaxFailStack+1)}},
		} {
			_, err := f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{c.item}, Now: f.now})
			wantInvalid(t, err, 0, c.field)
		}
		f.unchanged(before, "a refused Fail changes nothing")
		// At the limits, the attempt is recorded as it is.
		msg, stack := strings.Repeat("m", backend.MaxFailMessage), strings.Repeat("s", backend.MaxFailStack)
		res, err := f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{{Lease: lease(j), Message: msg, Stack: stack, Final: true}}, Now: f.now})
		if err != nil || res.Errors[0] != nil {
			t.Fatalf("Fail at the size limits: %v %v", err, res.Errors)
		}
		got := f.get(j.ID)
		if n := len(got.Errors); n != 1 || got.Errors[0].Message != msg || got.Errors[0].Stack != stack {
			t.Fatalf("recorded %d errors; want the one at the limits kept whole", n)
		}
	})
}
