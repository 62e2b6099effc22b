package mysql

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestFinalCountsAgreeWithRows: after jobs are completed (both ways),
// failed, cancelled, retried, purged, deleted and removed by retention,
// the kept counts of final jobs equal a count of the rows.
func TestFinalCountsAgreeWithRows(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var jobs []backend.NewJob
	for i := 0; i < 40; i++ {
		jobs = append(jobs, backend.NewJob{Type: "t", Queue: []string{"a", "b"}[i%2], MaxAttempts: 1})
	}
	jobs = append(jobs, backend.NewJob{Type: "t", Queue: "a", Retention: backend.RetainNone})
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"a", "b"}, Max: 30, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	lease := func(j *backend.Job) backend.Lease { return backend.Lease{JobID: j.ID, Token: j.LeaseToken} }
	var plain, withResult []backend.CompleteItem
	for _, j := range c.Jobs[:10] {
		plain = append(plain, backend.CompleteItem{Lease: lease(j)})
	}
	for _, j := range c.Jobs[10:15] {
		withResult = append(withResult, backend.CompleteItem{Lease: lease(j), Result: []byte("r")})
	}
	var fails []backend.FailItem
	for _, j := range c.Jobs[15:25] {
		fails = append(fails, backend.FailItem{Lease: lease(j), Message: "no", Cancel: j.Queue == "b"})
	}
	steps := []func() error{
		func() error { _, err := s.Complete(ctx, backend.CompleteParams{Items: plain, Now: now}); return err },
		func() error {
			_, err := s.Complete(ctx, backend.CompleteParams{Items: withResult, Now: now})
			return err
		},
		func() error { _, err := s.Fail(ctx, backend.FailParams{Items: fails, Now: now}); return err },
		func() error { _, err := s.Cancel(ctx, backend.CancelParams{ID: c.Jobs[25].ID, Now: now}); return err },
		func() error {
			_, err := s.RetryQueue(ctx, backend.RetryQueueParams{Queue: "a", State: backend.StateFailed, Limit: 2, Now: now})
			return err
		},
		func() error {
			_, err := s.Purge(ctx, backend.PurgeParams{Queue: "b", State: backend.StateCancelled, Limit: 2, Now: now})
			return err
		},
		func() error { return s.Delete(ctx, backend.DeleteParams{ID: c.Jobs[0].ID, Now: now}) },
		func() error {
			_, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: now.Add(2 * time.Minute)})
			return err
		},
		func() error {
			_, err := s.ApplyRetention(ctx, backend.MaintenanceParams{Now: now.Add(25 * time.Hour), Limit: 3})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		st, err := s.Stats(ctx, backend.StatsParams{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.DB().QueryContext(ctx, "SELECT queue, state, count(*) FROM `"+s.Prefix()+"jobs` GROUP BY queue, state")
		if err != nil {
			t.Fatal(err)
		}
		want := map[[2]string]int64{}
		for rows.Next() {
			var q, state string
			var n int64
			rows.Scan(&q, &state, &n)
			want[[2]string{q, state}] = n
		}
		rows.Close()
		for _, q := range st.Queues {
			for state, n := range q.Counts {
				if w := want[[2]string{q.Name, string(state)}]; n != w {
					t.Fatalf("after step %d: Stats counts %d %s jobs in %s; the table holds %d", i, n, state, q.Name, w)
				}
			}
		}
	}
}

// TestFinalCountsCountImported: final jobs written by Import are counted
// as final jobs of their queue and state, and a second import of them
// counts nothing more.
func TestFinalCountsCountImported(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var jobs []*backend.Job
	for i, st := range []backend.State{backend.StateCompleted, backend.StateFailed, backend.StateCancelled, backend.StateCompleted, backend.StatePending} {
		id, err := backend.NewID()
		if err != nil {
			t.Fatal(err)
		}
		j := &backend.Job{ID: id, Type: "t", Queue: []string{"a", "b"}[i%2], State: st, MaxAttempts: 1,
			Timeout: time.Minute, RunAt: now.Add(-time.Hour), CreatedAt: now.Add(-time.Hour), Retention: backend.RetainForever}
		if st.Final() {
			j.FinishedAt = now.Add(-time.Minute)
		}
		jobs = append(jobs, j)
	}
	for round := 0; round < 2; round++ {
		p := backend.ImportParams{Jobs: jobs, Now: now}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, p); err != nil {
			t.Fatalf("import %d: %v", round, err)
		}
		st, err := s.Stats(ctx, backend.StatsParams{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		got := map[[2]string]int64{}
		for _, q := range st.Queues {
			for state, n := range q.Counts {
				if n != 0 {
					got[[2]string{q.Name, string(state)}] = n
				}
			}
		}
		want := map[[2]string]int64{{"a", "completed"}: 1, {"b", "failed"}: 1, {"a", "cancelled"}: 1, {"b", "completed"}: 1, {"a", "pending"}: 1}
		if len(got) != len(want) {
			t.Fatalf("after import %d: Stats counts %v; want %v", round, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("after import %d: Stats counts %v; want %v", round, got, want)
			}
		}
	}
}
