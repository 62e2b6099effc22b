package pebble

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/cputime"
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
	// clients50 is 50 producers of one job per call, as 50 clients of the
	// server are: each waits for a group commit's sync before its next job.
	b.Run("clients50", func(b *testing.B) {
		const clients = 50
		s := openStore(b, b.TempDir(), Options{})
		ctx := context.Background()
		b.ReportAllocs()
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t", Payload: benchPayload}}, Now: t0}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkEnqueueBatch enqueues 100 jobs per call from a few concurrent
// producers.
func BenchmarkEnqueueBatch(b *testing.B) { benchEnqueueBatch(b, false) }

// BenchmarkEnqueueBatchJID is BenchmarkEnqueueBatch with a fresh JID on
// every job: each is looked up (a point read) before it is written.
func BenchmarkEnqueueBatchJID(b *testing.B) { benchEnqueueBatch(b, true) }

func benchEnqueueBatch(b *testing.B, jids bool) {
	const size = 100
	s := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		jobs := make([]backend.NewJob, size)
		for pb.Next() {
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "t", Payload: benchPayload}
				if jids {
					jobs[i].JID = "jid-" + strconv.FormatInt(n.Add(1), 36)
				}
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
	cpu0 := cputime.Process()
	b.ResetTimer()
	drained := drainQueue(b, s, workers, batch, benchClaimMaxBytes())
	b.StopTimer()
	if drained != total {
		b.Fatalf("drained %d of %d jobs", drained, total)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
	// The process's CPU time (user and system, every goroutine) per job:
	// less sensitive than wall time to other processes on the machine.
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(total), "cpu-ns/job")
}

// BenchmarkDrainNoop is the storage side of the root package's
// BenchmarkDrain50: b.N payload-less jobs kept with the default retention
// are drained by 2 workers, each claiming 50 at a time (a worker with
// 50 handlers) and completing them in one batch. Besides the rate it
// reports the process's CPU per job (the store's whole cost of a claim and
// a completion, Pebble's flushes and compactions included) and the group
// commits (syncs) per job, and the page faults per job where the system
// counts them (fresh memory: Pebble's memtables fill pages never touched
// before until the store has run a while).
func BenchmarkDrainNoop(b *testing.B) {
	const batch, workers = 50, 2
	st := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	for done := 0; done < b.N; done += 1000 {
		jobs := make([]backend.NewJob, min(1000, b.N-done))
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "noop"}
		}
		if _, err := st.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	faults0 := minorFaults()
	timedDrain(b, st, workers, batch)
	faults := minorFaults() - faults0
	if faults > 0 {
		b.ReportMetric(float64(faults)/float64(b.N), "faults/job")
	}
}

// BenchmarkDrainFlushed is the drain `kyu bench` measures, where the
// jobs' records and payloads sit in tables rather than in the memtable:
// b.N jobs with a 100-byte payload and the default retention, enqueued
// 100 per call by two producers and then flushed, are drained as in
// BenchmarkDrainNoop (2 workers claiming 50 at a time). Besides the rate
// it reports the process's CPU per job, the group commits (syncs) per job
// and the blocks Pebble read from its files per job (block cache
// misses). With KYU_BENCH_DRAIN_PROFILE=file it writes a CPU profile of
// the timed drain alone into file:
//
//	KYU_BENCH_DRAIN_PROFILE=drain.prof go test -run '^$' -bench DrainFlushed -benchtime 300000x ./backend/pebble/
func BenchmarkDrainFlushed(b *testing.B) {
	const batch, workers, size, producers = 50, 2, 100, 2
	st := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	payload := make([]byte, 100)
	for i := range payload {
		payload[i] = 'a' + byte(i%26) // as kyu bench's
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			jobs := make([]backend.NewJob, size)
			for {
				from := int(next.Add(size)) - size
				if from >= b.N {
					return
				}
				jobs = jobs[:min(size, b.N-from)]
				for i := range jobs {
					jobs[i] = backend.NewJob{Type: "t", Payload: payload}
				}
				if _, err := st.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := st.db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	misses0 := st.db.Metrics().BlockCache.Misses
	timedDrain(b, st, workers, batch)
	b.ReportMetric(float64(st.db.Metrics().BlockCache.Misses-misses0)/float64(b.N), "block-reads/job")
}

// timedDrain drains st's b.N pending jobs with workers claiming batch
// at a time, timed (with drainProfile's CPU profile, if asked for), and
// reports the rate, the process's CPU per job and the group commits
// (syncs) per job.
func timedDrain(b *testing.B, st *Store, workers, batch int) {
	st.mu.Lock()
	commits0 := st.commits
	st.mu.Unlock()
	cpu0 := cputime.Process()
	stopProfile := drainProfile(b)
	b.ResetTimer()
	drained := drainQueue(b, st, workers, batch, 0)
	b.StopTimer()
	stopProfile()
	cpu := cputime.Process() - cpu0
	if drained != b.N {
		b.Fatalf("drained %d of %d jobs", drained, b.N)
	}
	st.mu.Lock()
	commits := st.commits - commits0
	st.mu.Unlock()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(commits)/float64(b.N), "syncs/job")
}

// drainProfile starts a CPU profile into the file KYU_BENCH_DRAIN_PROFILE
// names, when it is set and b.N is more than 1, and returns its stop.
func drainProfile(b *testing.B) func() {
	path := os.Getenv("KYU_BENCH_DRAIN_PROFILE")
	if path == "" || b.N == 1 {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
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

// completedStore opens a store holding n completed jobs (split over two
// queues and two types) and 1,000 pending ones, with n = 1,000,000 when
// KYU_BENCH_MILLION=1 and 100,000 otherwise. The store is built through
// the API once and kept on disk under the system's temporary directory
// (it is rebuilt when the format changes), so later runs only reopen it.
func completedStore(b *testing.B) (*Store, int) {
	n := 100_000
	if os.Getenv("KYU_BENCH_MILLION") == "1" {
		n = 1_000_000
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("kyu-bench-completed-%d-format%d", n, formatVersion))
	ready := filepath.Join(dir, "bench-ready")
	if _, err := os.Stat(ready); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		buildCompleted(b, filepath.Join(dir, "store"), n)
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return openStore(b, filepath.Join(dir, "store"), Options{}), n
}

// BenchmarkCompletedStoreOpen reopens the store of completed jobs and
// reports the time the rebuild takes and the heap the indexes hold (per
// job, and in all).
func BenchmarkCompletedStoreOpen(b *testing.B) {
	s, n := completedStore(b)
	dir := s.dir
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s-open")
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapInuse) - float64(before.HeapInuse)
		b.ReportMetric(heap/(1<<20), "MiB-heap")
		b.ReportMetric(heap/float64(n), "B-heap/job")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func buildCompleted(b *testing.B, dir string, n int) {
	const size = 1000
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for done := 0; done < n; done += size {
		q := []string{"default", "other"}[done/size%2]
		jobs := make([]backend.NewJob, size)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: []string{"mail", "report"}[i%2], Queue: q, Payload: benchPayload, Retention: backend.RetainForever}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
			b.Fatal(err)
		}
		cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{q}, Max: size, Lease: time.Hour, Now: t0})
		if err != nil || len(cl.Jobs) != size {
			b.Fatalf("claimed %d, %v", len(cl.Jobs), err)
		}
		items := make([]backend.CompleteItem, size)
		for i, j := range cl.Jobs {
			items[i] = backend.CompleteItem{Lease: leaseOf(j), Result: []byte("ok")}
		}
		if _, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	jobs := make([]backend.NewJob, size)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "mail", Queue: "other", Payload: benchPayload}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkListFirstPage lists the first page (50 jobs) of a store of
// completed jobs, with each kind of filter. The target is 50 ms.
func BenchmarkListFirstPage(b *testing.B) {
	s, n := completedStore(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    backend.ListParams
	}{
		{"all", backend.ListParams{}},
		{"all-newest", backend.ListParams{Order: backend.NewestFirst}},
		{"queue", backend.ListParams{Queue: "other"}},
		{"state", backend.ListParams{State: backend.StateCompleted}},
		{"queue-state", backend.ListParams{Queue: "other", State: backend.StateCompleted}},
		{"state-pending", backend.ListParams{State: backend.StatePending}},
		{"type", backend.ListParams{Type: "report"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.List(ctx, c.p)
				if err != nil || len(res.Jobs) != backend.DefaultListLimit || res.NextCursor == "" {
					b.Fatalf("List(%+v) of %d jobs = %d jobs, cursor %q, %v", c.p, n, len(res.Jobs), res.NextCursor, err)
				}
			}
		})
	}
}

// BenchmarkStatsCounts reads the per-queue, per-state counts (and the
// oldest pending job, and a day of per-minute counters) of a store of
// completed jobs. The target is 50 ms.
func BenchmarkStatsCounts(b *testing.B) {
	s, n := completedStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		st, err := s.Stats(ctx, backend.StatsParams{Now: t0, Minutes: 1440})
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, q := range st.Queues {
			total += q.Counts[backend.StateCompleted]
		}
		if total != int64(n) || st.Processed != int64(n) {
			b.Fatalf("Stats counted %d completed, %d processed; want %d", total, st.Processed, n)
		}
	}
}

// benchClaimMaxBytes reads KYU_BENCH_CLAIM_MAX_BYTES, the payload budget
// of the claim benchmarks' claims (0, no bound, when unset), to measure a
// claim bounded as the server bounds its claims.
func benchClaimMaxBytes() int {
	n, _ := strconv.Atoi(os.Getenv("KYU_BENCH_CLAIM_MAX_BYTES"))
	return n
}

// drainQueue claims (Max batch, MaxBytes maxBytes) and completes the
// pending jobs of the default queue with workers goroutines until none is
// left, and returns how many it completed.
func drainQueue(tb testing.TB, s *Store, workers, batch, maxBytes int) int {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	drained := 0
	for range workers {
		wg.Go(func() {
			for {
				res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: batch, Lease: time.Minute, WorkerID: "w", Now: t0, MaxBytes: maxBytes})
				if err != nil {
					tb.Error(err)
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
					tb.Error(err)
					return
				}
				for _, e := range r.Errors {
					if e != nil {
						tb.Error(e)
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
	return drained
}
