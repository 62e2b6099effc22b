package redis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestFormatNewStore: a new store is marked with formatVersion and
// writes a pending job whose fields are defaults with the short header,
// any other with the long one. A claimed job of a short header keeps its
// run-at "" (its creation), and the scripts that put it back among the
// pending (Release, RecoverLeases) score it by the run-at in its body;
// Get reads it back due at its creation.
func TestFormatNewStore(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	c := s.client
	if v, err := c.Do(ctx, c.B().Hget().Key(s.keys.meta()).Field("kyu").Build()).ToString(); err != nil || v != strconv.Itoa(formatVersion) {
		t.Fatalf("marker of a new store = %q, %v; want %d", v, err, formatVersion)
	}
	if !s.short {
		t.Fatal("a new store does not write short headers")
	}
	// Now is some ms before the clock: the body's CreatedAt is then
	// counted back from the id's time.
	now := time.Now().Add(-5 * time.Second).Truncate(time.Millisecond).UTC()
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
		{Type: "t", Queue: "q"}, {Type: "t", Queue: "q", MaxAttempts: 3}, {Type: "t", Queue: "q", Priority: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	qk := s.keys.queue(num)
	head := func(id string) string {
		t.Helper()
		rec, err := c.Do(ctx, c.B().Hget().Key(qk.jobs()).Field(id).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if isBare(rec) {
			return "bare"
		}
		h, _, _ := strings.Cut(rec, "\n")
		return h
	}
	for i, want := range []string{"bare", "p3", ""} {
		h := head(res.Jobs[i].ID)
		if want == "" && !isShortHeader(h) {
			continue
		}
		if h != want {
			t.Errorf("job %d: header %q, want %q", i, h, want)
		}
	}
	for _, ej := range res.Jobs {
		j, err := s.Get(ctx, backend.GetParams{ID: ej.ID})
		if err != nil || !j.RunAt.Equal(now) || !j.CreatedAt.Equal(now) || j.State != backend.StatePending {
			t.Fatalf("Get of pending job: %+v, %v; want due and created at %v", j, err, now)
		}
	}

	score := func(id string) string {
		t.Helper()
		v, err := c.Do(ctx, c.B().Zscore().Key(qk.ready()).Member(id).Build()).ToString()
		if err != nil {
			t.Fatalf("score of %s: %v", id, err)
		}
		return v
	}
	want := map[string]string{}
	for _, ej := range res.Jobs {
		want[ej.ID] = score(ej.ID)
	}
	claimAll := func(lease time.Duration) []backend.Lease {
		t.Helper()
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: lease, WorkerID: "w", Now: now})
		if err != nil || len(got.Jobs) != 3 {
			t.Fatalf("Claim = %d jobs, %v; want 3", len(got.Jobs), err)
		}
		var ls []backend.Lease
		for _, j := range got.Jobs {
			if !j.RunAt.Equal(now) {
				t.Errorf("claimed job %s due at %v, want %v", j.ID, j.RunAt, now)
			}
			ls = append(ls, backend.Lease{JobID: j.ID, Token: j.LeaseToken})
		}
		return ls
	}
	ls := claimAll(time.Minute)
	if h := head(res.Jobs[0].ID); !strings.HasPrefix(h, "a|1|25|1|0||") {
		t.Errorf("claimed header %q, want active with run-at \"\"", h)
	}
	if j, err := s.Get(ctx, backend.GetParams{ID: res.Jobs[0].ID}); err != nil || !j.RunAt.Equal(now) {
		t.Fatalf("Get of active job: %+v, %v; want due at %v", j, err, now)
	}
	if r, err := s.Release(ctx, backend.ReleaseParams{Leases: ls, Now: now.Add(time.Second)}); err != nil || r.Errors[0] != nil {
		t.Fatalf("Release = %+v, %v", r, err)
	}
	for id, w := range want {
		if got := score(id); got != w {
			t.Errorf("released job %s scored %s, want %s as enqueued", id, got, w)
		}
	}
	claimAll(time.Second)
	if r, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(time.Minute)}); err != nil || r.Moved != 3 {
		t.Fatalf("RecoverLeases = %+v, %v; want 3 moved", r, err)
	}
	for id, w := range want {
		if got := score(id); got != w {
			t.Errorf("recovered job %s scored %s, want %s as enqueued", id, got, w)
		}
	}
}

// TestFormat2Store: a store marked with format 2 (as a kyu of format 2
// made it) opens, keeps its marker, and is written with long headers
// only, as a kyu of format 2 writes them, so that one can share it; its
// jobs drain.
func TestFormat2Store(t *testing.T) {
	t.Parallel()
	s := openTestFormat(t, 2)
	ctx := t.Context()
	c := s.client
	if s.short {
		t.Fatal("a store of format 2 writes short headers")
	}
	now := time.Now().Truncate(time.Millisecond).UTC()
	jobs := make([]backend.NewJob, 20)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: "q", Payload: []byte("x")}
	}
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	// Lone enqueues too: they take another way (coalesce.go).
	for range 3 {
		r, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: jobs[:1]})
		if err != nil {
			t.Fatal(err)
		}
		res.Jobs = append(res.Jobs, r.Jobs...)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	recs, err := c.Do(ctx, c.B().Hgetall().Key(s.keys.queue(num).jobs()).Build()).AsStrMap()
	if err != nil || len(recs) != len(res.Jobs) {
		t.Fatalf("jobs hash holds %d records, %v; want %d", len(recs), err, len(res.Jobs))
	}
	for id, rec := range recs {
		if h, _, _ := strings.Cut(rec, "\n"); !strings.HasPrefix(h, "p|0|25|0|0|"+strconv.FormatInt(now.UnixMilli(), 10)+"|") {
			t.Errorf("job %s: header %q, want the long one with its run-at", id, h)
		}
	}
	drained := 0
	for drained < len(res.Jobs) {
		got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 7, Lease: time.Minute, WorkerID: "w", Now: now})
		if err != nil || len(got.Jobs) == 0 {
			t.Fatalf("Claim = %d jobs, %v, with %d of %d drained", len(got.Jobs), err, drained, len(res.Jobs))
		}
		for _, j := range got.Jobs {
			rec, err := c.Do(ctx, c.B().Hget().Key(s.keys.queue(num).jobs()).Field(j.ID).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if h, _, _ := strings.Cut(rec, "\n"); strings.Split(h, "|")[hRunAt-1] == "" {
				t.Errorf("claimed header %q has no run-at", h)
			}
		}
		cr, err := s.Complete(ctx, backend.CompleteParams{Items: completeItems(got.Jobs), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range cr.Errors {
			if e != nil {
				t.Fatal(e)
			}
		}
		drained += len(got.Jobs)
	}
	if v, err := c.Do(ctx, c.B().Hget().Key(s.keys.meta()).Field("kyu").Build()).ToString(); err != nil || v != "2" {
		t.Errorf("marker after the drain = %q, %v; want 2", v, err)
	}
}

// TestRetryUniqueFor: Retry of a failed job that held its unique key for
// a period (UniqueFor) does not ask for the key again, so another job
// that holds it since the period ended does not stop the retry; one that
// held its key until final is stopped by such a job (ErrUniqueKeyHeld).
// The scripts tell the two apart by the body (hasUniqueFor in
// lua/common.lua), whose form differs by format.
func TestRetryUniqueFor(t *testing.T) {
	t.Parallel()
	eachFormat(t, func(t *testing.T, s *Store, v int) {
		ctx := t.Context()
		now := time.Now().Truncate(time.Millisecond).UTC()
		for _, period := range []time.Duration{time.Minute, 0} {
			key := "k" + period.String()
			enq := func(at time.Time) string {
				t.Helper()
				res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: at, Jobs: []backend.NewJob{
					{Type: "t", Queue: "q", UniqueKey: key, UniqueFor: period, MaxAttempts: 1},
				}})
				if err != nil || res.Jobs[0].Duplicate {
					t.Fatalf("Enqueue = %+v, %v", res, err)
				}
				return res.Jobs[0].ID
			}
			a := enq(now)
			got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, WorkerID: "w", Now: now})
			if err != nil || len(got.Jobs) != 1 || got.Jobs[0].ID != a {
				t.Fatalf("Claim = %+v, %v", got, err)
			}
			fr, err := s.Fail(ctx, backend.FailParams{Items: []backend.FailItem{{Lease: backend.Lease{JobID: a, Token: got.Jobs[0].LeaseToken}, Message: "no"}}, Now: now})
			if err != nil || fr.Errors[0] != nil {
				t.Fatalf("Fail = %+v, %v", fr, err)
			}
			later := now.Add(2 * time.Minute)
			enq(later)
			_, err = s.Retry(ctx, backend.RetryParams{ID: a, Now: later})
			if period > 0 && err != nil {
				t.Errorf("Retry of a job of UniqueFor %v: %v, want it retried", period, err)
			}
			if period == 0 && !errors.Is(err, backend.ErrUniqueKeyHeld) {
				t.Errorf("Retry of a job held until final: %v, want ErrUniqueKeyHeld", err)
			}
		}
	})
}
