package mysql

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// bigEnv turns on TestClaimWithMillionFinished, which writes a million
// rows (a minute or more): KYU_TEST_MYSQL_BIG=1.
const bigEnv = "KYU_TEST_MYSQL_BIG"

// TestClaimWithMillionFinished: claims stay as fast with 1,000,000
// completed jobs in the table (in the claimed queue itself) as with an
// empty one: p50 within twice the empty table's. It also reports how
// long Stats and a listing of failed jobs take then.
func TestClaimWithMillionFinished(t *testing.T) {
	if os.Getenv(bigEnv) == "" {
		t.Skipf("set %s=1 to run the benchmark with a million finished jobs", bigEnv)
	}
	s := openTestStore(t, Options{})
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	claimP50 := func() time.Duration {
		var ds []time.Duration
		for range 300 {
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: "q", Payload: make([]byte, 100)}}, Now: now}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute, Now: now})
			ds = append(ds, time.Since(t0))
			if err != nil || len(c.Jobs) != 1 {
				t.Fatalf("Claim = %v, %v", c.Jobs, err)
			}
			j := c.Jobs[0]
			if _, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	empty := claimP50()
	t0 := time.Now()
	// A million completed jobs of queue q, with ids below every real one.
	fill := "INSERT INTO `" + s.Prefix() + "jobs` (id, queue, state, priority, run_at, type, title, attempt, max_attempts, lease_token," +
		" timeout_ns, created_at, started_at, finished_at, expires_at, payload)" +
		" SELECT CONCAT('00000000-0000-7000-8000-', LPAD(seq, 12, '0')), 'q', 'completed', 0, ?, 't', '', 1, 25, 1," +
		" 1800000000000, ?, ?, ?, ?, REPEAT('x', 100) FROM seq_%d_to_%d"
	for from := 1; from <= 1_000_000; from += 100_000 {
		n := micros(now)
		q := fmtSeq(fill, from, from+99_999)
		if _, err := s.DB().ExecContext(ctx, q, n, n, n, n, micros(now.Add(24*time.Hour))); err != nil {
			t.Skipf("cannot fill the table (the sequence engine is MariaDB's): %v", err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "INSERT INTO `"+s.Prefix()+"final_counts` (queue, state, shard, n) VALUES ('q', 'completed', 0, 1000000)"+
		" ON DUPLICATE KEY UPDATE n = n + 1000000"); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote 1,000,000 completed jobs in %v", time.Since(t0))
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE `"+s.Prefix()+"jobs`"); err != nil {
		t.Fatal(err)
	}
	big := claimP50()
	t0 = time.Now()
	st, err := s.Stats(ctx, backend.StatsParams{Now: now})
	statsT := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, err := s.List(ctx, backend.ListParams{State: backend.StateFailed, Queue: "q", Limit: 50}); err != nil {
		t.Fatal(err)
	}
	listT := time.Since(t0)
	t0 = time.Now()
	if _, err := s.List(ctx, backend.ListParams{State: backend.StatePending, Limit: 50}); err != nil {
		t.Fatal(err)
	}
	listPendingT := time.Since(t0)
	t.Logf("claim p50: empty %v, with 1,000,000 completed %v; Stats %v (%d completed), List failed %v, List pending %v",
		empty, big, statsT, st.Queues[0].Counts[backend.StateCompleted], listT, listPendingT)
	if big > 2*empty {
		t.Errorf("claim p50 with a million completed jobs %v is over twice the empty table's %v", big, empty)
	}
}

// fmtSeq fills the sequence bounds into a fill statement.
func fmtSeq(q string, from, to int) string {
	return fmt.Sprintf(q, from, to)
}
