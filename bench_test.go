package kyu_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

func BenchmarkDrain10(b *testing.B) { benchmarkDrain(b, 10) }
func BenchmarkDrain50(b *testing.B) { benchmarkDrain(b, 50) }

// benchmarkDrain enqueues b.N no-op jobs, then times a worker with the
// given concurrency draining them, until every outcome is recorded.
func benchmarkDrain(b *testing.B, concurrency int) {
	s := newStore(b)
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
		Queues: map[string]int{"bench": concurrency},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drained %d of %d jobs", n.Load(), b.N)
	}
	// Shutdown waits until every outcome is recorded.
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if st := w.Stats(); st.Succeeded != total {
		b.Fatalf("succeeded = %d, want %d", st.Succeeded, total)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
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
