package redis

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// benchPayload is the 100-byte payload of the benchmarks (and of kyu bench).
var benchPayload = make([]byte, 100)

// BenchmarkEnqueue enqueues one job per call from 10 goroutines.
func BenchmarkEnqueue(b *testing.B) {
	s := openTest(b, "")
	ctx := context.Background()
	b.SetParallelism(max(1, 10/runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueLone enqueues one job per call from one goroutine, as
// a lone producer does: no other call is ever on its way.
func BenchmarkEnqueueLone(b *testing.B) {
	s := openTest(b, "")
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		_, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueBatch enqueues 100 jobs per call from 10 goroutines;
// one op is one call.
func BenchmarkEnqueueBatch(b *testing.B) {
	s := openTest(b, "")
	ctx := context.Background()
	jobs := make([]backend.NewJob, 100)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload}
	}
	b.SetParallelism(max(1, 10/runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkDrain claims (50 per call) and completes (one call per claimed
// batch) b.N waiting jobs from 4 goroutines; one op is one job.
func BenchmarkDrain(b *testing.B) {
	s := openTest(b, "")
	ctx := context.Background()
	jobs := make([]backend.NewJob, 1000)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload}
	}
	for n := 0; n < b.N; n += len(jobs) {
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs[:min(len(jobs), b.N-n)]}); err != nil {
			b.Fatal(err)
		}
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for left.Load() > 0 {
				res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 50, Lease: time.Minute, WorkerID: "bench", Now: time.Now(), MaxBytes: benchClaimMaxBytes()})
				if err != nil {
					b.Error(err)
					return
				}
				items := completeItems(res.Jobs)
				if len(items) > 0 {
					if _, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: time.Now()}); err != nil {
						b.Error(err)
						return
					}
				}
				left.Add(-int64(len(items)))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkMemory measures Redis used_memory per pending job with a
// 100-byte payload, on a private server (so nothing else moves the
// figure): b.N jobs are enqueued in calls of 1000, into one queue.
func BenchmarkMemory(b *testing.B) {
	ps := startServer(b, "--appendonly", "no")
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	usedMemory := func() int64 {
		out, err := s.client.Do(ctx, s.client.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(out, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	jobs := make([]backend.NewJob, 1000)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload}
	}
	// One job first, so the queue's keys and the registry exist.
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs[:1]}); err != nil {
		b.Fatal(err)
	}
	before := usedMemory()
	b.ResetTimer()
	for n := 0; n < b.N; n += len(jobs) {
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs[:min(len(jobs), b.N-n)]}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(usedMemory()-before)/float64(b.N), "bytes/job")
}

// benchClaimMaxBytes reads KYU_BENCH_CLAIM_MAX_BYTES, the payload budget
// of the claim benchmarks' claims (0, no bound, when unset), to measure a
// claim bounded as the server bounds its claims.
func benchClaimMaxBytes() int {
	n, _ := strconv.Atoi(os.Getenv("KYU_BENCH_CLAIM_MAX_BYTES"))
	return n
}
