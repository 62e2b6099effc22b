package postgres

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// benchPayload is the 100-byte payload of every benchmark job.
func benchPayload() []byte {
	return []byte(`{"n":1,"pad":"` + fmt.Sprintf("%085d", 0) + `"}`)
}

func benchStore(b *testing.B, conns int32) *Store {
	b.Helper()
	return openTestStore(b, Options{MaxConns: conns, VacuumEvery: benchVacuumEvery()})
}

// BenchmarkEnqueue: one job per call, from 10 goroutines.
func BenchmarkEnqueue(b *testing.B) {
	s := benchStore(b, 10)
	b.SetParallelism(5) // 10 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.Enqueue(b.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "bench", Queue: "bench", Payload: benchPayload()}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueBatch: 100 jobs per call, from 10 goroutines.
func BenchmarkEnqueueBatch(b *testing.B) {
	s := benchStore(b, 10)
	jobs := make([]backend.NewJob, 100)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload()}
	}
	b.SetParallelism(5)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(b.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete: claim 50 and complete them in one call, from
// 4 goroutines, over jobs enqueued beforehand.
func BenchmarkClaimComplete(b *testing.B) {
	s := benchStore(b, 8)
	const per = 50
	total := b.N * per
	jobs := make([]backend.NewJob, 1000)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload()}
	}
	for n := 0; n < total; n += len(jobs) {
		if _, err := s.Enqueue(b.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	var done, claimNs, completeNs atomic.Int64
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := time.Now()
			t0 := time.Now()
			res, err := s.Claim(b.Context(), backend.ClaimParams{Queues: []string{"bench"}, Max: per, Lease: time.Minute, Now: now, MaxBytes: benchClaimMaxBytes()})
			if err != nil {
				b.Error(err)
				return
			}
			t1 := time.Now()
			claimNs.Add(int64(t1.Sub(t0)))
			items := make([]backend.CompleteItem, len(res.Jobs))
			for i, j := range res.Jobs {
				items[i] = backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}
			}
			if _, err := s.Complete(b.Context(), backend.CompleteParams{Items: items, Now: now}); err != nil {
				b.Error(err)
				return
			}
			completeNs.Add(int64(time.Since(t1)))
			done.Add(int64(len(items)))
		}
	})
	b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(claimNs.Load())/float64(b.N)/1e6, "ms/claim")
	b.ReportMetric(float64(completeNs.Load())/float64(b.N)/1e6, "ms/complete")
}

// benchVacuumEvery reads KYU_BENCH_VACUUM_EVERY (0, the store's default,
// when unset).
func benchVacuumEvery() int {
	n, _ := strconv.Atoi(os.Getenv("KYU_BENCH_VACUUM_EVERY"))
	return n
}

// benchClaimMaxBytes reads KYU_BENCH_CLAIM_MAX_BYTES, the payload budget
// of the claim benchmarks' claims (0, no bound, when unset), to measure a
// claim bounded as the server bounds its claims.
func benchClaimMaxBytes() int {
	n, _ := strconv.Atoi(os.Getenv("KYU_BENCH_CLAIM_MAX_BYTES"))
	return n
}
