package mysql

import (
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestCoalescedEnqueues: concurrent small enqueues, coalesced, each get
// their own ids and creation times, and every job is written once.
func TestCoalescedEnqueues(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 4})
	base := time.Now().UTC().Truncate(time.Millisecond)
	const callers, each = 20, 25
	ids := make([][]string, callers)
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				now := base.Add(time.Duration(c) * time.Second)
				res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Queue: "c", Payload: []byte{byte(i)}}}, Now: now})
				if err != nil {
					errs <- err
					return
				}
				ids[c] = append(ids[c], res.Jobs[0].ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for c, cids := range ids {
		for _, id := range cids {
			j, err := s.Get(t.Context(), backend.GetParams{ID: id})
			if err != nil {
				t.Fatalf("Get(%s): %v", id, err)
			}
			if want := base.Add(time.Duration(c) * time.Second); !j.CreatedAt.Equal(want) {
				t.Fatalf("job of caller %d created at %v; want its own clock %v", c, j.CreatedAt, want)
			}
		}
	}
	st, err := s.Stats(t.Context(), backend.StatsParams{Now: base})
	if err != nil || len(st.Queues) != 1 || st.Queues[0].Counts[backend.StatePending] != callers*each {
		t.Fatalf("Stats = %+v, %v; want %d pending", st.Queues, err, callers*each)
	}
}

// TestCoalescedBatches: concurrent batch enqueues, coalesced up to
// coalesceBatch jobs and coalesceBytes of payload, each get their own
// jobs written once; a batch past the byte bound goes alone.
func TestCoalescedBatches(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 4})
	now := time.Now().UTC().Truncate(time.Millisecond)
	const callers, calls, batch = 8, 4, 120
	big := make([]byte, coalesceBytes/4+1)
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	var mu sync.Mutex
	written := map[string]int{}
	total := 0
	for c := range callers {
		wg.Go(func() {
			for k := range calls {
				n, payload := batch, []byte{byte(c)}
				if c == 0 && k == 0 {
					// Past the byte bound: written on its own.
					n, payload = 5, big
				}
				jobs := make([]backend.NewJob, n)
				for i := range jobs {
					jobs[i] = backend.NewJob{Type: "t", Queue: "b", Payload: payload}
				}
				res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Jobs: jobs, Now: now})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total += n
				for _, j := range res.Jobs {
					written[j.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(written) != total {
		t.Fatalf("%d distinct ids for %d jobs", len(written), total)
	}
	var n int
	if err := s.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM `+s.table("jobs")+` WHERE queue = 'b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != total {
		t.Fatalf("%d rows for %d jobs enqueued", n, total)
	}
}
