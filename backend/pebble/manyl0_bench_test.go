package pebble

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/cputime"
)

// BenchmarkManyL0 measures reads of a disk store whose jobs were written
// in 3 parts with a memtable flush after each, then left until Pebble is
// idle: level 0 then holds what the compaction settings leave there (3
// sublevels of overlapping tables if 3 are under the threshold that
// starts a compaction of level 0). It times 20,000 Gets of random jobs by
// id, then a drain of the b.N jobs by a kyu.Worker of 50 handlers, and
// reports level 0's tables and sublevels and the read amplification at
// the start, and for each part the CPU and block cache misses per read or
// job. It runs only with KYU_BENCH_SUSTAINED=1:
//
//	KYU_BENCH_SUSTAINED=1 go test -run '^$' -bench ManyL0 -benchtime 300000x ./backend/pebble/
func BenchmarkManyL0(b *testing.B) {
	if os.Getenv("KYU_BENCH_SUSTAINED") != "1" {
		b.Skip("set KYU_BENCH_SUSTAINED=1 to run it")
	}
	st := openStore(b, b.TempDir(), Options{})
	ctx := context.Background()
	payload := make([]byte, 100)
	const parts = 3
	var ids []string
	for p := range parts {
		for done := p * b.N / parts; done < (p+1)*b.N/parts; done += 100 {
			jobs := make([]backend.NewJob, min(100, (p+1)*b.N/parts-done))
			for i := range jobs {
				jobs[i] = backend.NewJob{Type: "noop", Queue: "q", Payload: payload}
			}
			res, err := st.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()})
			if err != nil {
				b.Fatal(err)
			}
			for _, j := range res.Jobs {
				ids = append(ids, j.ID)
			}
		}
		if err := st.db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	waitPebbleIdle(b, st)
	m0 := st.db.Metrics()

	const gets = 20000
	rng := rand.New(rand.NewPCG(1, 2))
	cpu0 := cputime.Process()
	start := time.Now()
	for range gets {
		if _, err := st.Get(ctx, backend.GetParams{ID: ids[rng.IntN(len(ids))]}); err != nil {
			b.Fatal(err)
		}
	}
	getTime, getCPU := time.Since(start), cputime.Process()-cpu0
	m1 := st.db.Metrics()

	ran := newRunCount(b.N)
	w, err := kyu.NewWorker(st, kyu.WorkerConfig{Handler: ran, Queues: map[string]int{"q": 50}})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 = cputime.Process()
	b.ResetTimer()
	start = time.Now()
	ran.startAndAwait(ctx, b, w)
	ran.awaitStored(b, w)
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	m2 := st.db.Metrics()
	if err := w.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	// b.ResetTimer dropped the metrics reported before it.
	b.ReportMetric(float64(m0.Levels[0].TablesCount), "L0-tables")
	b.ReportMetric(float64(m0.Levels[0].Sublevels), "L0-sublevels")
	b.ReportMetric(float64(m0.ReadAmp()), "read-amp")
	b.ReportMetric(float64(getTime.Nanoseconds())/1e3/gets, "get-µs")
	b.ReportMetric(float64(getCPU.Nanoseconds())/1e3/gets, "get-cpu-µs")
	b.ReportMetric(float64(m1.BlockCache.Misses-m0.BlockCache.Misses)/gets, "get-cache-misses")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/job")
	b.ReportMetric(float64(m2.BlockCache.Misses-m1.BlockCache.Misses)/float64(b.N), "cache-misses/job")
	b.ReportMetric(float64(m2.Compact.Count-m1.Compact.Count), "drain-compactions")
}
