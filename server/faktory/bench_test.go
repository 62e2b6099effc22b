package faktory_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/server/faktory"
)

// BenchmarkPushBFetchAck measures the listener over the embedded store
// (or the store at the URL KYU_FAKTORY_BENCH_STORE names, which it must
// find empty):
// b.N jobs pushed by PUSHB in batches of 100, then fetched and ACKed by
// 20 connections. It reports both rates and the CPU time per job. The
// 20 connections belong to one worker process (one wid, as a Faktory
// client's connection pool with concurrency 20 has), or to 20.
func BenchmarkPushBFetchAck(b *testing.B) {
	for _, wids := range []int{1, 20} {
		b.Run(fmt.Sprintf("wids=%d", wids), func(b *testing.B) { benchPushBFetchAck(b, wids) })
	}
}

// benchPushBFetchAck runs BenchmarkPushBFetchAck with the connections
// spread over wids worker ids.
func benchPushBFetchAck(b *testing.B, wids int) {
	var store backend.Backend
	var err error
	if u := os.Getenv("KYU_FAKTORY_BENCH_STORE"); u != "" {
		store, err = backendurl.Open(context.Background(), u, backendurl.Options{})
	} else {
		store, err = pebble.Open(b.TempDir(), pebble.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	counted := &countingStore{Backend: store}
	l, err := faktory.New(faktory.Config{Backend: counted, Addr: "127.0.0.1:0", FetchWait: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	addr := l.Addr().String()
	producer := hello(b, addr, "", nil)
	const workers = 20
	conns := make([]*fwp, workers)
	for i := range conns {
		conns[i] = hello(b, addr, "", map[string]any{"wid": fmt.Sprintf("w%d", i%wids)})
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	counted.claims.Store(0)
	counted.completes.Store(0)

	start := time.Now()
	for sent := 0; sent < b.N; {
		n := min(100, b.N-sent)
		batch := make([]any, n)
		for i := range batch {
			batch[i] = map[string]any{"jid": fmt.Sprintf("%d-%d", b.N, sent+i), "jobtype": "noop", "args": []any{sent + i}}
		}
		if a := producer.cmd("PUSHB", batch); string(a.bulk) != "{}" {
			b.Fatalf("PUSHB answered %c%s %s", a.kind, a.text, a.bulk)
		}
		sent += n
	}
	pushed := time.Since(start)

	start = time.Now()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			for left.Load() > 0 {
				a := c.cmd("FETCH", "default")
				if a.kind != '$' {
					b.Errorf("FETCH answered %c%s", a.kind, a.text)
					return
				}
				if a.bulk == nil {
					continue
				}
				j := a.job(b)
				c.cmd("ACK", map[string]any{"jid": j["jid"]}).ok(b)
				left.Add(-1)
			}
		})
	}
	wg.Wait()
	ran := time.Since(start)
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(b.N)/pushed.Seconds(), "pushed/s")
	b.ReportMetric(float64(b.N)/ran.Seconds(), "fetched+acked/s")
	b.ReportMetric(float64(b.N)/float64(max(counted.claims.Load(), 1)), "jobs/claim")
	b.ReportMetric(float64(b.N)/float64(max(counted.completes.Load(), 1)), "jobs/complete")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingStore counts the store calls FETCH and ACK make.
type countingStore struct {
	backend.Backend
	claims, completes atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	s.claims.Add(1)
	return s.Backend.Claim(ctx, p)
}

func (s *countingStore) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	s.completes.Add(1)
	return s.Backend.Complete(ctx, p)
}
