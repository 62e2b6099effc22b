package pebble

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/cputime"
)

// BenchmarkWorkerDrain is `kyu bench`'s drain through a kyu.Worker of 50
// handlers in this process, on the disk and on an in-memory file system,
// whose syncs cost nothing (the most that taking the sync out of the
// drain's cycle could give), one after the other in one process so that
// runs alternate:
//
//	go test -run '^$' -bench WorkerDrain -benchtime 100000x -count 4 ./backend/pebble/
//
// b.N jobs with a 100-byte payload are enqueued 100 per call, then
// drained by no-op handlers until every outcome is recorded. Besides the
// rate it reports the process's CPU per job, the group commits (syncs)
// per job and the records its claims read from Pebble under the store's
// mutex per job (those not read ahead, prefetch.go). disk-2pools is the
// drain on the disk of a worker with two pools of 25 handlers, each with
// a queue (and so a fetcher) of its own, half the jobs in each.
func BenchmarkWorkerDrain(b *testing.B) {
	for _, mode := range []struct {
		name   string
		mem    bool
		queues int
	}{{"disk", false, 1}, {"memfs", true, 1}, {"disk-2pools", false, 2}} {
		b.Run(mode.name, func(b *testing.B) { benchWorkerDrain(b, mode.mem, mode.queues) })
	}
}

func benchWorkerDrain(b *testing.B, mem bool, nq int) {
	st := openBenchStore(b, mem)
	ctx := context.Background()
	payload := kyuBenchPayload()
	queues := map[string]int{"bench": 50}
	names := []string{"bench"}
	if nq == 2 {
		queues = map[string]int{"bench": 25, "bench2": 25}
		names = []string{"bench", "bench2"}
	}
	for done := 0; done < b.N; done += 100 {
		jobs := make([]backend.NewJob, min(100, b.N-done))
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "noop", Queue: names[(done/100)%len(names)], Payload: payload}
		}
		if _, err := st.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	ran := newRunCount(b.N)
	tc := &timedClaims{Store: st}
	w, err := kyu.NewWorker(tc, kyu.WorkerConfig{Handler: ran, Queues: queues})
	if err != nil {
		b.Fatal(err)
	}
	st.mu.Lock()
	commits0, reads0 := st.commits, st.claimReads
	st.mu.Unlock()
	cpu0 := cputime.Process()
	b.ResetTimer()
	start := time.Now()
	ran.startAndAwait(ctx, b, w)
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	st.mu.Lock()
	commits, reads := st.commits-commits0, st.claimReads-reads0
	st.mu.Unlock()
	if s := w.Stats(); s.Succeeded != ran.total {
		b.Fatalf("succeeded = %d, want %d", s.Succeeded, ran.total)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(commits)/float64(b.N), "syncs/job")
	b.ReportMetric(float64(reads)/float64(b.N), "mu-reads/job")
	if n := tc.claims.Load(); n > 0 {
		b.ReportMetric(float64(tc.wait.Load())/1e3/float64(n), "claim-µs/claim")
		b.ReportMetric(float64(elapsed.Nanoseconds())/1e3/float64(n), "µs/claim-cycle")
	}
}

// timedClaims times the Claim calls of a worker: the whole call, most of
// which is the wait for its commit, is that part of the drain's cycle.
type timedClaims struct {
	*Store
	claims, wait atomic.Int64
}

func (c *timedClaims) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	t := time.Now()
	res, err := c.Store.Claim(ctx, p)
	c.wait.Add(int64(time.Since(t)))
	c.claims.Add(1)
	return res, err
}

// openBenchStore opens a store in a temporary directory on the disk, or
// with mem on an in-memory file system, whose syncs cost nothing.
func openBenchStore(b *testing.B, mem bool) *Store {
	if mem {
		return openStore(b, "/kyu", Options{FS: vfs.NewMem()})
	}
	return openStore(b, b.TempDir(), Options{})
}

// kyuBenchPayload is kyu bench's payload: 100 bytes of letters.
func kyuBenchPayload() []byte {
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	return payload
}

// runCount is a benchmark's handler: it does nothing but count the jobs
// it ran, and closes done at the total.
type runCount struct {
	n     atomic.Int64
	total int64
	done  chan struct{}
}

func newRunCount(total int) *runCount {
	return &runCount{total: int64(total), done: make(chan struct{})}
}

// ProcessJob implements kyu.Handler.
func (c *runCount) ProcessJob(context.Context, *kyu.Job) error {
	if c.n.Add(1) == c.total {
		close(c.done)
	}
	return nil
}

// startAndAwait starts w and waits until its handlers have run c.total
// jobs, failing after five minutes.
func (c *runCount) startAndAwait(ctx context.Context, b *testing.B, w *kyu.Worker) {
	b.Helper()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d jobs", c.n.Load(), c.total)
	}
}

// awaitStored then waits until w has stored every outcome, as kyu
// bench's drain ends, which the worker's count tells without a signal
// of its own; it fails after a minute.
func (c *runCount) awaitStored(b *testing.B, w *kyu.Worker) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for w.Stats().Succeeded < c.total {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d outcomes stored", w.Stats().Succeeded, c.total)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
