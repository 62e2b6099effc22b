package pebble

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/internal/cputime"
)

// BenchmarkKyuBenchDrain is `kyu bench --concurrency 50`'s drain with the
// phases before it, beside the drain of jobs just enqueued that
// BenchmarkWorkerDrain times, so that what the phases cost the drain can
// be measured apart, on the disk and on an in-memory file system (whose
// syncs cost nothing):
//
//   - fresh: b.N jobs enqueued 100 per call, then drained (as
//     BenchmarkWorkerDrain);
//   - phases: as kyu bench, b.N jobs enqueued one per call by 10
//     producers into one queue, b.N 100 per call into another, then the
//     first queue drained while Pebble flushes and compacts what the
//     enqueues wrote;
//   - settled: the same, but the drain starts once Pebble has flushed
//     its memtables and no flush or compaction runs: the jobs are read
//     from tables, and nothing runs beside the drain;
//   - aged: as settled, then b.N jobs more enqueued 100 per call into a
//     third queue, which is drained: the store's history without the
//     table reads.
//
// Every job has kyu bench's 100-byte payload and is written and drained
// through a kyu.Client and a kyu.Worker of 50 handlers. Besides the rate
// it reports the process's CPU per job, the group commits (syncs) per
// job, the mean duration of Pebble's log syncs, and Pebble's work in the
// drain: block cache misses and hits per job, the flushes and
// compactions that ended in it, their duration and the bytes they wrote,
// and the level 0 tables and memtables at its start. With
// KYU_BENCH_DRAIN_PROFILE=file it writes a CPU profile of the timed
// drain (of the last run) into file. Each run of phases takes several
// seconds before its drain, so it runs only with KYU_BENCH_PHASES=1:
//
//	KYU_BENCH_PHASES=1 go test -run '^$' -bench KyuBenchDrain -benchtime 100000x -count 3 ./backend/pebble/
func BenchmarkKyuBenchDrain(b *testing.B) {
	if os.Getenv("KYU_BENCH_PHASES") != "1" {
		b.Skip("set KYU_BENCH_PHASES=1 to run it")
	}
	for _, fs := range []string{"disk", "memfs"} {
		for _, mode := range []string{"fresh", "phases", "settled", "aged"} {
			b.Run(fs+"/"+mode, func(b *testing.B) { benchKyuBenchDrain(b, mode, fs == "memfs") })
		}
	}
}

func benchKyuBenchDrain(b *testing.B, mode string, mem bool) {
	st := openBenchStore(b, mem)
	ctx := context.Background()
	client := kyu.NewClient(st, kyu.ClientConfig{})
	payload := kyuBenchPayload()
	const jobType = "kyu.bench"
	fill := func(queue string, perCall, producers int) {
		calls := (b.N + perCall - 1) / perCall
		var next atomic.Int64
		var wg sync.WaitGroup
		opts := kyu.EnqueueOptions{Queue: queue}
		for range min(producers, calls) {
			wg.Go(func() {
				batch := make([]kyu.JobSpec, 0, perCall)
				for {
					call := int(next.Add(1)) - 1
					if call >= calls {
						return
					}
					var err error
					if perCall == 1 {
						_, err = client.Enqueue(ctx, jobType, payload, opts)
					} else {
						batch = batch[:0]
						for range min(perCall, b.N-call*perCall) {
							batch = append(batch, kyu.JobSpec{Type: jobType, Payload: payload, EnqueueOptions: opts})
						}
						_, err = client.EnqueueMany(ctx, batch)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	drained := "single"
	if mode != "fresh" {
		fill("single", 1, 10)
		fill("batch", 100, 10)
	}
	if mode == "settled" || mode == "aged" {
		if err := st.db.Flush(); err != nil {
			b.Fatal(err)
		}
		waitPebbleIdle(b, st)
	}
	if mode == "fresh" || mode == "aged" {
		drained = "fresh"
		fill(drained, 100, 1)
	}

	ran := newRunCount(b.N)
	mux := kyu.NewMux()
	mux.HandleFunc(jobType, ran.ProcessJob)
	w, err := kyu.NewWorker(st, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{drained: 50}})
	if err != nil {
		b.Fatal(err)
	}
	st.mu.Lock()
	commits0 := st.commits
	st.mu.Unlock()
	m0 := st.db.Metrics()
	fsyncs0, d0 := fsyncs(m0)
	cpu0 := cputime.Process()
	stopProfile := drainProfile(b)
	b.ResetTimer()
	start := time.Now()
	ran.startAndAwait(ctx, b, w)
	ran.awaitStored(b, w)
	elapsed := time.Since(start)
	b.StopTimer()
	stopProfile()
	cpu := cputime.Process() - cpu0
	m1 := st.db.Metrics()
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	st.mu.Lock()
	commits := st.commits - commits0
	st.mu.Unlock()
	perJob := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(perJob(cpu.Nanoseconds())/1e3, "cpu-µs/job")
	b.ReportMetric(perJob(int64(commits)), "syncs/job")
	reportPebbleWork(b, m0, m1)
	in0 := compactedBytes(m0) + flushedBytes(m0)
	in1 := compactedBytes(m1) + flushedBytes(m1)
	b.ReportMetric(float64(in1-in0)/(1<<20), "MiB-flushed+compacted")
	b.ReportMetric(float64(m0.Levels[0].TablesCount), "L0-tables-at-start")
	b.ReportMetric(float64(m0.MemTable.Count), "memtables-at-start")
	if syncs, d := fsyncs(m1); syncs > fsyncs0 {
		b.ReportMetric(float64(d-d0)/1e3/float64(syncs-fsyncs0), "log-sync-µs")
	}
}

// reportPebbleWork reports Pebble's work between the metrics m0 and m1
// of a run of b.N jobs: block cache misses and hits per job, and the
// flushes and compactions that ended, with the compactions' duration.
func reportPebbleWork(b *testing.B, m0, m1 *cpebble.Metrics) {
	perJob := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(perJob(m1.BlockCache.Misses-m0.BlockCache.Misses), "cache-misses/job")
	b.ReportMetric(perJob(m1.BlockCache.Hits-m0.BlockCache.Hits), "cache-hits/job")
	b.ReportMetric(float64(m1.Flush.Count-m0.Flush.Count), "flushes")
	b.ReportMetric(float64(m1.Compact.Count-m0.Compact.Count), "compactions")
	b.ReportMetric(float64(m1.Compact.Duration-m0.Compact.Duration)/1e6, "compact-ms")
}

// compactedBytes is the bytes Pebble's compactions have written, at every
// level.
func compactedBytes(m *cpebble.Metrics) uint64 {
	var n uint64
	for l := range m.Levels {
		n += m.Levels[l].TableBytesCompacted
	}
	return n
}

// flushedBytes is the bytes Pebble's flushes have written.
func flushedBytes(m *cpebble.Metrics) uint64 {
	var n uint64
	for l := range m.Levels {
		n += m.Levels[l].TableBytesFlushed
	}
	return n
}

// fsyncs reads the count of Pebble's log syncs and their total duration
// from its latency histogram.
func fsyncs(m *cpebble.Metrics) (uint64, time.Duration) {
	var pm dto.Metric
	if m.LogWriter.FsyncLatency == nil || m.LogWriter.FsyncLatency.Write(&pm) != nil || pm.Histogram == nil {
		return 0, 0
	}
	return pm.Histogram.GetSampleCount(), time.Duration(pm.Histogram.GetSampleSum())
}

// waitPebbleIdle waits until no flush or compaction is running in st's
// Pebble and none has started for a while, failing after a minute.
func waitPebbleIdle(b *testing.B, st *Store) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	quiet := 0
	var last int64
	for quiet < 20 {
		if time.Now().After(deadline) {
			b.Fatal("Pebble still flushing or compacting after a minute")
		}
		m := st.db.Metrics()
		busy := m.Compact.NumInProgress+m.Flush.NumInProgress > 0
		if c := m.Compact.Count + m.Flush.Count; busy || c != last {
			quiet, last = 0, c
		} else {
			quiet++
		}
		time.Sleep(10 * time.Millisecond)
	}
}
