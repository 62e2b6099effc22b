package pebble

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Every benchmark runs with durability on: each call is fsynced before it
// returns. They finish quickly at -benchtime 1x.

var benchPayload = []byte(`{"to":"someone@example.com","subject":"hello"}`)

func BenchmarkEnqueue(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		s := openStore(b, b.TempDir(), Options{})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Payload: benchPayload}}, Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
	b.Run("parallel", func(b *testing.B) {
		s := openStore(b, b.TempDir(), Options{})
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Payload: benchPayload}}, Now: t0}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkEnqueueBatch enqueues 100 jobs per call from a few concurrent
// producers.
func BenchmarkEnqueueBatch(b *testing.B) {
	const size = 100
	s := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		jobs := make([]backend.NewJob, size)
		for pb.Next() {
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "t", Payload: benchPayload}
			}
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete drains b.N*100 pending jobs with 4 workers, each
// claiming 100 at a time and completing them in one batch.
func BenchmarkClaimComplete(b *testing.B) {
	const batch, workers = 100, 4
	s := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	total := b.N * batch
	for done := 0; done < total; done += 1000 {
		jobs := make([]backend.NewJob, min(1000, total-done))
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Payload: benchPayload, Retention: backend.RetainNone}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	drained := 0
	for range workers {
		wg.Go(func() {
			for {
				res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: batch, Lease: time.Minute, Now: t0})
				if err != nil {
					b.Error(err)
					return
				}
				if len(res.Jobs) == 0 {
					return
				}
				items := make([]backend.CompleteItem, len(res.Jobs))
				for i, j := range res.Jobs {
					items[i] = backend.CompleteItem{Lease: leaseOf(j)}
				}
				r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: t0})
				if err != nil {
					b.Error(err)
					return
				}
				for _, e := range r.Errors {
					if e != nil {
						b.Error(e)
						return
					}
				}
				mu.Lock()
				drained += len(items)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if drained != total {
		b.Fatalf("drained %d of %d jobs", drained, total)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkPendingMillion enqueues a million pending jobs and reports the
// process's resident memory. It is skipped unless KYU_BENCH_MILLION=1, since
// it takes a while.
func BenchmarkPendingMillion(b *testing.B) {
	if os.Getenv("KYU_BENCH_MILLION") != "1" {
		b.Skip("set KYU_BENCH_MILLION=1 to run")
	}
	const n, size = 1_000_000, 1000
	for b.Loop() {
		dir := b.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for done := 0; done < n; done += size {
			jobs := make([]backend.NewJob, size)
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "t", Payload: benchPayload, Priority: i % 3}
			}
			if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		b.ReportMetric(vmRSS(b), "MiB-RSS-after-enqueue")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		s, err = Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s-reopen")
		runtime.GC()
		b.ReportMetric(vmRSS(b), "MiB-RSS-after-reopen")
		if got := claim(b, s, t0, 10); len(got) != 10 {
			b.Fatalf("claimed %d", len(got))
		}
		_ = s.Close()
	}
}

// vmRSS reads the resident set size from /proc/self/status in MiB.
func vmRSS(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}
