package kyutest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/kyutest"
)

// TestDrainRunsFollowUps drains a chain of jobs, each enqueued by the
// handler of the one before. A hop or the drain's end that waited for a
// poll (1 s) or Drain's recheck (1 s) instead of a signal would take the
// drain past 900 ms; it takes about a millisecond.
func TestDrainRunsFollowUps(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	c := kyu.NewClient(store, kyu.ClientConfig{})
	const hops = 5
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		n, _ := strconv.Atoi(string(j.Payload))
		if n+1 < hops {
			_, err := c.Enqueue(ctx, "hop", []byte(strconv.Itoa(n+1)), kyu.EnqueueOptions{})
			return err
		}
		return nil
	})
	if _, err := c.Enqueue(t.Context(), "hop", []byte("0"), kyu.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := kyutest.Drain(t.Context(), t, store, h)
	took := time.Since(start)
	t.Logf("drained %d hops in %s", hops, took)
	if res.Processed != hops || len(res.Errors) != 0 {
		t.Fatalf("Drain = %+v; want %d processed, no errors", res, hops)
	}
	if took >= 900*time.Millisecond {
		t.Fatalf("Drain of %d hops took %s; want no wait for a poll", hops, took)
	}
	kyutest.RequireEnqueuedN(t, store, kyutest.Want{Type: "hop", State: kyu.StateCompleted}, hops)
}

func TestDrainRetriesDueJobsOnly(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	c := kyu.NewClient(store, kyu.ClientConfig{})
	var calls atomic.Int32
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		switch j.Type {
		case "flaky":
			if j.Attempt == 1 {
				return kyu.RetryAfter(0, errors.New("first attempt fails"))
			}
		case "slow-retry":
			return errors.New("retried in a while")
		case "later":
			t.Error("a job scheduled an hour ahead ran")
		}
		calls.Add(1)
		return nil
	})
	for _, s := range []kyu.JobSpec{
		{Type: "flaky", EnqueueOptions: kyu.EnqueueOptions{Queue: "a"}},
		{Type: "slow-retry", EnqueueOptions: kyu.EnqueueOptions{Queue: "b"}},
		{Type: "later", EnqueueOptions: kyu.EnqueueOptions{Queue: "a", Delay: time.Hour}},
		{Type: "other-queue", EnqueueOptions: kyu.EnqueueOptions{Queue: "c"}},
	} {
		if _, err := c.EnqueueMany(t.Context(), []kyu.JobSpec{s}); err != nil {
			t.Fatal(err)
		}
	}
	res := kyutest.Drain(t.Context(), t, store, h, "a", "b")
	if res.Processed != 3 || len(res.Errors) != 2 {
		t.Fatalf("Drain = %+v; want 3 processed (flaky twice, slow-retry once), 2 errors", res)
	}
	kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "flaky", State: kyu.StateCompleted})
	kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "slow-retry", State: kyu.StateRetry})
	kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "later", State: kyu.StateScheduled})
	kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "other-queue", State: kyu.StatePending})
}

func TestDrainEmpty(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error { return nil })
	if res := kyutest.Drain(t.Context(), t, store, h); res.Processed != 0 {
		t.Fatalf("Drain of an empty store = %+v", res)
	}
}

// TestDrainDeadline drains a queue whose handler never returns: Drain
// fails the test when its context ends, naming what is left, and the job
// is handed back rather than left active.
func TestDrainDeadline(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	c := kyu.NewClient(store, kyu.ClientConfig{})
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		<-ctx.Done()
		return ctx.Err()
	})
	res, err := c.Enqueue(t.Context(), "stuck", nil, kyu.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := fails(t, func(tb testing.TB) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		kyutest.Drain(ctx, tb, store, h)
	})
	if !strings.Contains(msg, `1 pending or active in "default" left when the context ended`) {
		t.Fatalf("Drain failed with %q; want it to name the job left", msg)
	}
	j, err := c.Get(t.Context(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != kyu.StatePending {
		t.Fatalf("the stuck job is %s after Drain; want pending (handed back)", j.State)
	}
}
