package redis

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestDataLost: when Redis loses its data under running processes (a
// restart without persistence, a FLUSHDB), a process whose cached queue
// number has meanwhile been given to another queue must not write into or
// claim from that other queue.
func TestDataLost(t *testing.T) {
	t.Parallel()
	a := openTest(t, "")
	ctx := t.Context()
	o := a.opts
	b, err := Open(ctx, Options{Addrs: o.Addrs, DB: o.DB, Username: o.Username, Password: o.Password, Prefix: o.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	enqueue := func(s *Store, queue string) string {
		t.Helper()
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: queue}}})
		if err != nil {
			t.Fatalf("Enqueue into %s: %v", queue, err)
		}
		return res.Jobs[0].ID
	}
	claim := func(s *Store, queue string) []*backend.Job {
		t.Helper()
		res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{queue}, Max: 10, Lease: time.Minute, Now: now})
		if err != nil {
			t.Fatalf("Claim from %s: %v", queue, err)
		}
		return res.Jobs
	}
	enqueue(a, "emails") // a caches emails -> 1
	if err := dropPrefix(o); err != nil {
		t.Fatal(err)
	}
	// After the loss, b is first: reports gets number 1.
	reports := enqueue(b, "reports")
	if got := claim(a, "emails"); len(got) != 0 {
		t.Fatalf("a claimed %d jobs from emails (the reports job %s?); want none", len(got), got[0].ID)
	}
	emails := enqueue(a, "emails")
	if n1, _ := queueNumOf(reports); n1 == func() uint32 { n, _ := queueNumOf(emails); return n }() {
		t.Fatalf("emails job %s and reports job %s share a queue number", emails, reports)
	}
	if j, err := b.Get(ctx, backend.GetParams{ID: emails}); err != nil || j.Queue != "emails" {
		t.Fatalf("Get(emails job) = %v, %v; want a job of queue emails", j, err)
	}
	if got := claim(b, "reports"); len(got) != 1 || got[0].ID != reports {
		t.Fatalf("b claimed %d jobs from reports; want only %s", len(got), reports)
	}
	if got := claim(a, "emails"); len(got) != 1 || got[0].ID != emails {
		t.Fatalf("a claimed %d jobs from emails; want only %s", len(got), emails)
	}

	// A loss with no other process: the queue is registered and marked again.
	if err := dropPrefix(o); err != nil {
		t.Fatal(err)
	}
	again := enqueue(a, "emails")
	if got := claim(b, "emails"); len(got) != 1 || got[0].ID != again {
		t.Fatalf("b claimed %d jobs from emails after the second loss; want only %s", len(got), again)
	}
}
