package kyu_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/internal/cputime"
)

func BenchmarkDrain10(b *testing.B) { benchmarkDrain(b, 10) }
func BenchmarkDrain50(b *testing.B) { benchmarkDrain(b, 50) }

// benchmarkDrain enqueues b.N no-op jobs, then times a worker with the
// given concurrency draining them, until every outcome is recorded. The
// store is the in-memory one, or the one named by the URL in
// KYU_BENCH_BACKEND (pebble:///dir for the embedded one; a fresh Redis
// prefix or PostgreSQL schema; the benchmark does not clean it up).
// KYU_BENCH_CLAIM_AHEAD, if set, is the worker's ClaimAhead (by default
// 0, none), for an A/B of one build:
//
//	KYU_BENCH_BACKEND=pebble://$(mktemp -d) KYU_BENCH_CLAIM_AHEAD=50 go test -run '^$' -bench 'Drain50$' -benchtime 40000x .
//
// Besides the rate it reports the process's CPU per job during the drain
// (the worker's, and the store's when it is embedded) and how many jobs
// each Claim and Complete call carried.
func benchmarkDrain(b *testing.B, concurrency int) {
	var st backend.Backend
	if u := os.Getenv("KYU_BENCH_BACKEND"); u != "" {
		s, err := backendurl.Open(context.Background(), u, backendurl.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		st = s
	} else {
		st = newStore(b)
	}
	s := &countingBackend{Backend: st}
	c := kyu.NewClient(s, kyu.ClientConfig{})
	ctx := context.Background()
	const batch = 1000
	jobs := make([]kyu.JobSpec, 0, batch)
	for i := 0; i < b.N; i += batch {
		jobs = jobs[:0]
		for j := i; j < min(i+batch, b.N); j++ {
			jobs = append(jobs, kyu.JobSpec{Type: "noop", EnqueueOptions: kyu.EnqueueOptions{Queue: "bench"}})
		}
		if _, err := c.EnqueueMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}

	ahead := 0
	if v := os.Getenv("KYU_BENCH_CLAIM_AHEAD"); v != "" {
		var err error
		if ahead, err = strconv.Atoi(v); err != nil {
			b.Fatalf("KYU_BENCH_CLAIM_AHEAD: %v", err)
		}
	}
	var n atomic.Int64
	done := make(chan struct{})
	total := int64(b.N)
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error {
			if n.Add(1) == total {
				close(done)
			}
			return nil
		}),
		Queues:     map[string]int{"bench": concurrency},
		ClaimAhead: ahead,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	s.reset()
	timeDrain(b, w, done, &n)
	s.report(b)
}

// timeDrain starts w, waits until its handler has seen b.N jobs (done is
// closed; n counts them) and w has shut down, which waits until every
// outcome is recorded, and reports the rate and the process's CPU per job.
func timeDrain(b *testing.B, w *kyu.Worker, done <-chan struct{}, n *atomic.Int64) {
	ctx := context.Background()
	cpu0 := cputime.Process()
	sw0 := switches()
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d jobs", n.Load(), b.N)
	}
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	cpu := cputime.Process() - cpu0
	b.StopTimer()
	if st := w.Stats(); st.Succeeded != int64(b.N) {
		b.Fatalf("succeeded = %d, want %d", st.Succeeded, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(switches()-sw0)/float64(b.N), "ctxsw/job")
}

// switches is the count of the process's threads' context switches,
// voluntary and not: each is a thread that slept (a futex wait, most
// often: no goroutine to run) or was preempted.
func switches() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// countingBackend counts the Claim and Complete calls that reach a
// backend and the jobs they carry.
type countingBackend struct {
	backend.Backend
	claims, claimed, completes, completed atomic.Int64
}

func (c *countingBackend) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res, err := c.Backend.Claim(ctx, p)
	c.claims.Add(1)
	c.claimed.Add(int64(len(res.Jobs)))
	return res, err
}

func (c *countingBackend) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	c.completes.Add(1)
	c.completed.Add(int64(len(p.Items)))
	return c.Backend.Complete(ctx, p)
}

func (c *countingBackend) reset() {
	c.claims.Store(0)
	c.claimed.Store(0)
	c.completes.Store(0)
	c.completed.Store(0)
}

// report adds the jobs per Claim and per Complete call to b's metrics.
func (c *countingBackend) report(b *testing.B) {
	if n := c.claims.Load(); n > 0 {
		b.ReportMetric(float64(c.claimed.Load())/float64(n), "jobs/claim")
	}
	if n := c.completes.Load(); n > 0 {
		b.ReportMetric(float64(c.completed.Load())/float64(n), "jobs/complete")
	}
}

func BenchmarkEnqueue(b *testing.B) {
	s := newStore(b)
	c := kyu.NewClient(s, kyu.ClientConfig{})
	// A 100-byte payload, the size of a typical small JSON job.
	payload := []byte(`{"to":"someone@example.com","subject":"hello","body":"see you at 10","lang":"en","n":1234,"x":"abc"}`)
	if len(payload) != 100 {
		b.Fatalf("payload is %d bytes, want 100", len(payload))
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			opts := kyu.EnqueueOptions{Title: "job " + strconv.FormatInt(seq.Add(1), 10)}
			if _, err := c.Enqueue(ctx, "email.send", payload, opts); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
