package kyu_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// BenchmarkWorkerOverhead drains b.N no-op jobs from a fake store whose
// Claim and Complete only wait a fixed round trip, so the process's CPU
// per job is the worker's own (and the fake's small share). The fake
// makes each job's record as it is claimed, as a store decodes it, so the
// heap holds only the jobs in flight: records built up front, live until
// claimed, had every garbage collection of the drain scan all of them.
func BenchmarkWorkerOverhead(b *testing.B) {
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		b.Run("rtt="+rtt.String(), func(b *testing.B) { benchmarkOverhead(b, 50, rtt, 0, 0) })
	}
}

// BenchmarkWorkerOverlap drains b.N jobs as BenchmarkWorkerOverhead does,
// each handler sleeping 1ms, from a fake store whose calls take 1ms: with
// claims ahead (ClaimAhead 50, one claim's worth) the next claim's round
// trip overlaps the handlers' sleep, about 50 jobs a millisecond; without
// (the default) each batch waits for its claim, then for its handlers,
// about 25.
func BenchmarkWorkerOverlap(b *testing.B) {
	for _, ahead := range []int{50, 0} {
		name := "ahead=50"
		if ahead == 0 {
			name = "ahead=none"
		}
		b.Run(name, func(b *testing.B) { benchmarkOverhead(b, 50, time.Millisecond, time.Millisecond, ahead) })
	}
}

// benchmarkOverhead drains b.N jobs with handlers that sleep work, from a
// fakeBackend whose calls take rtt, claiming ahead as ClaimAhead says.
func benchmarkOverhead(b *testing.B, concurrency int, rtt, work time.Duration, ahead int) {
	fb := &fakeBackend{left: b.N, rtt: rtt, sub: make(chan struct{})}
	var n atomic.Int64
	total := int64(b.N)
	done := make(chan struct{})
	w, err := kyu.NewWorker(fb, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error {
			if work > 0 {
				time.Sleep(work)
			}
			if n.Add(1) == total {
				close(done)
			}
			return nil
		}),
		Queues:             map[string]int{"bench": concurrency},
		ClaimAhead:         ahead,
		DisableMaintenance: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	timeDrain(b, w, done, &n)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	b.ReportMetric(float64(b.N)/float64(max(fb.claims, 1)), "jobs/claim")
	b.ReportMetric(float64(b.N)/float64(max(fb.completes, 1)), "jobs/complete")
}

// fakeBackend hands out pre-built jobs and accepts every outcome, each
// call taking rtt; the rest of the contract is left unimplemented.
type fakeBackend struct {
	backend.Backend
	rtt time.Duration
	sub chan struct{}

	mu sync.Mutex
	// left is how many jobs are still to be claimed; claimed how many
	// were.
	left, claimed     int
	claims, completes int
}

func (f *fakeBackend) wait() {
	if f.rtt > 0 {
		time.Sleep(f.rtt)
	}
}

func (f *fakeBackend) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	n := min(p.Max, f.left)
	jobs := make([]*backend.Job, n)
	for i := range jobs {
		jobs[i] = &backend.Job{
			ID: strconv.Itoa(f.claimed + i), Queue: "bench", Type: "noop", State: backend.StateActive,
			Payload: make([]byte, 100), Attempt: 1, MaxAttempts: 25, Timeout: backend.DefaultTimeout,
			LeaseToken: 1, WorkerID: p.WorkerID, LeaseExpiresAt: p.Now.Add(p.Lease),
		}
	}
	f.left -= n
	f.claimed += n
	return backend.ClaimResult{Jobs: jobs}, nil
}

func (f *fakeBackend) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	f.wait()
	f.mu.Lock()
	f.completes++
	f.mu.Unlock()
	return backend.BatchResult{}, nil
}

func (f *fakeBackend) Heartbeat(ctx context.Context, p backend.HeartbeatParams) (backend.HeartbeatResult, error) {
	return backend.HeartbeatResult{Leases: make([]backend.LeaseStatus, len(p.Leases))}, nil
}

func (f *fakeBackend) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	return backend.NewSubscription(f.sub, nil), nil
}

func (f *fakeBackend) RegisterWorker(ctx context.Context, p backend.RegisterWorkerParams) (backend.RegisterWorkerResult, error) {
	return backend.RegisterWorkerResult{}, nil
}

func (f *fakeBackend) DeregisterWorker(ctx context.Context, p backend.DeregisterWorkerParams) error {
	return nil
}
