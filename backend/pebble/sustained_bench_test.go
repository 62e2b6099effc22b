package pebble

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/internal/cputime"
)

// BenchmarkSustainedMix is a sustained mixed load on the disk store:
// producers enqueue b.N jobs (half one per call from 8 goroutines, half
// 100 per call from one) while a kyu.Worker of 50 handlers drains the
// queue, long enough for Pebble to flush and compact many times. It
// reports the process's CPU per job and the rate over the whole run, the
// flushes and compactions and the bytes they wrote (+settle: with those
// that run after a last flush once the drain ends), the largest backlog,
// and level 0's tables and sublevels and the read amplification sampled
// every 100 ms (mean and max); with -v it logs them once a second. A run
// of 800,000 jobs takes about 30 s, so it runs only with
// KYU_BENCH_SUSTAINED=1:
//
//	KYU_BENCH_SUSTAINED=1 go test -run '^$' -bench SustainedMix -benchtime 800000x ./backend/pebble/
func BenchmarkSustainedMix(b *testing.B) {
	if os.Getenv("KYU_BENCH_SUSTAINED") != "1" {
		b.Skip("set KYU_BENCH_SUSTAINED=1 to run it")
	}
	st := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	client := kyu.NewClient(st, kyu.ClientConfig{})
	payload := kyuBenchPayload()
	const jobType, queue = "kyu.bench", "mix"
	opts := kyu.EnqueueOptions{Queue: queue}

	ran := newRunCount(b.N)
	mux := kyu.NewMux()
	mux.HandleFunc(jobType, ran.ProcessJob)
	w, err := kyu.NewWorker(st, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{queue: 50}})
	if err != nil {
		b.Fatal(err)
	}

	singles := b.N / 2
	batched := b.N - singles
	var enq atomic.Int64
	var wg sync.WaitGroup
	var nextSingle atomic.Int64
	for range 8 {
		wg.Go(func() {
			for nextSingle.Add(1) <= int64(singles) {
				if _, err := client.Enqueue(ctx, jobType, payload, opts); err != nil {
					b.Error(err)
					return
				}
				enq.Add(1)
			}
		})
	}
	wg.Go(func() {
		batch := make([]kyu.JobSpec, 0, 100)
		for left := batched; left > 0; left -= len(batch) {
			batch = batch[:0]
			for range min(100, left) {
				batch = append(batch, kyu.JobSpec{Type: jobType, Payload: payload, EnqueueOptions: opts})
			}
			if _, err := client.EnqueueMany(ctx, batch); err != nil {
				b.Error(err)
				return
			}
			enq.Add(int64(len(batch)))
		}
	})

	type sample struct {
		at                  time.Duration
		l0, sub, amp, mem   int64
		backlog, compacting int64
	}
	var samples []sample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	m0 := st.db.Metrics()
	cpu0 := cputime.Process()
	start := time.Now()
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
			m := st.db.Metrics()
			samples = append(samples, sample{
				at: time.Since(start), l0: m.Levels[0].TablesCount, sub: int64(m.Levels[0].Sublevels),
				amp: int64(m.ReadAmp()), mem: m.MemTable.Count, backlog: enq.Load() - ran.n.Load(),
				compacting: m.Compact.NumInProgress,
			})
		}
	}()
	b.ResetTimer()
	ran.startAndAwait(ctx, b, w)
	ran.awaitStored(b, w)
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	close(stopSampling)
	<-sampled
	wg.Wait()
	m1 := st.db.Metrics()
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	// What the run left to compact, done once it ends, so that work put
	// off past its end is counted too.
	if err := st.db.Flush(); err != nil {
		b.Fatal(err)
	}
	waitPebbleIdle(b, st)
	m2 := st.db.Metrics()
	perJob := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(perJob(cpu.Nanoseconds())/1e3, "cpu-µs/job")
	reportPebbleWork(b, m0, m1)
	comp0 := compactedBytes(m0)
	b.ReportMetric(float64(compactedBytes(m1)-comp0)/(1<<20), "MiB-compacted")
	b.ReportMetric(float64(compactedBytes(m2)-comp0)/(1<<20), "MiB-compacted+settle")
	b.ReportMetric(float64(m2.Compact.Duration-m0.Compact.Duration)/1e6, "compact-ms+settle")
	var sumL0, maxL0, sumSub, maxSub, sumAmp, maxAmp, maxBacklog int64
	for _, s := range samples {
		sumL0, maxL0 = sumL0+s.l0, max(maxL0, s.l0)
		sumSub, maxSub = sumSub+s.sub, max(maxSub, s.sub)
		sumAmp, maxAmp = sumAmp+s.amp, max(maxAmp, s.amp)
		maxBacklog = max(maxBacklog, s.backlog)
	}
	if k := int64(len(samples)); k > 0 {
		b.ReportMetric(float64(sumL0)/float64(k), "L0-tables-mean")
		b.ReportMetric(float64(maxL0), "L0-tables-max")
		b.ReportMetric(float64(sumSub)/float64(k), "L0-sublevels-mean")
		b.ReportMetric(float64(maxSub), "L0-sublevels-max")
		b.ReportMetric(float64(sumAmp)/float64(k), "read-amp-mean")
		b.ReportMetric(float64(maxAmp), "read-amp-max")
		b.ReportMetric(float64(maxBacklog), "backlog-max")
	}
	var sb strings.Builder
	for i, s := range samples {
		if i%10 == 9 {
			fmt.Fprintf(&sb, "\n%5.1fs L0 %d tables %d sublevels, read-amp %d, memtables %d, compacting %d, backlog %d",
				s.at.Seconds(), s.l0, s.sub, s.amp, s.mem, s.compacting, s.backlog)
		}
	}
	b.Logf("levels over time:%s", sb.String())
}
