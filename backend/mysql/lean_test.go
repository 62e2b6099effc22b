package mysql

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestLeanCompleteExpiry: the one-statement completion sets the expiry
// backend.Expiry gives (job retention, then the queue's, then the
// default; forever as none), and leaves to the general path what it
// cannot do (a stale lease, a job deleted at once).
func TestLeanCompleteExpiry(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hour := backend.QueueRetention{Completed: backend.RetainFor(time.Hour)}
	if _, err := s.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: "kept", Retention: &hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		queue string
		keep  backend.Retention
		want  time.Time
		lean  bool
	}{
		{"q", backend.RetainDefault, now.Add(backend.DefaultRetentionCompleted), true},
		{"kept", backend.RetainDefault, now.Add(time.Hour), true},
		{"kept", backend.RetainFor(2 * time.Minute), now.Add(2 * time.Minute), true},
		{"q", backend.RetainForever, time.Time{}, true},
		{"q", backend.RetainNone, time.Time{}, false},
	} {
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: c.queue, Retention: c.keep}}, Now: now}); err != nil {
			t.Fatal(err)
		}
		cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{c.queue}, Max: 1, Lease: time.Minute, Now: now})
		if err != nil || len(cl.Jobs) != 1 {
			t.Fatalf("Claim = %v, %v", cl.Jobs, err)
		}
		j := cl.Jobs[0]
		before := s.leanCompletes.Load()
		res, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: now})
		if err != nil || res.Errors[0] != nil {
			t.Fatalf("Complete = %v, %v", res.Errors, err)
		}
		if lean := s.leanCompletes.Load() > before; lean != c.lean {
			t.Fatalf("%s/%v: lean completion %v; want %v", c.queue, c.keep, lean, c.lean)
		}
		got, err := s.Get(ctx, backend.GetParams{ID: j.ID})
		if c.keep == backend.RetainNone {
			if err == nil {
				t.Fatalf("a RetainNone job is still there after Complete: %+v", got)
			}
			continue
		}
		if err != nil || got.State != backend.StateCompleted || !got.ExpiresAt.Equal(c.want) || !got.FinishedAt.Equal(now) {
			t.Fatalf("%s/%v: job = %+v, %v; want completed at %v, expiring %v", c.queue, c.keep, got, err, now, c.want)
		}
		// A second completion of the same lease is stale: refused by
		// the general path.
		res, err = s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: now})
		if err != nil || res.Errors[0] != backend.ErrLeaseLost {
			t.Fatalf("second Complete = %v, %v; want ErrLeaseLost", res.Errors, err)
		}
	}
}
