package redis

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/internal/cputime"
)

// BenchmarkRedisCPU measures what each kind of call costs Redis, on a
// private server (so nothing else moves the figures), per job: b.N jobs
// enqueued one per call from 10 goroutines, b.N more in calls of 100,
// all 2·b.N claimed (50 per call) and then completed (50 per call) by 4
// goroutines, and 2·b.N more drained by a kyu.Worker with 50 handlers. Each phase
// reports Redis's own CPU time (INFO cpu, user + system: scripts, parsing,
// networking), its scripts' time (INFO commandstats of EVAL, EVALSHA
// and FCALL) and the CPU time of this process (the client side: the
// store, rueidis and, in drain50, the worker; getrusage) in µs per job,
// with its heap allocations per job, and the jobs per script run; the drain also reports the jobs per Claim and per Complete call.
//
//	go test -run '^$' -bench RedisCPU -benchtime 20000x ./backend/redis/
func BenchmarkRedisCPU(b *testing.B) {
	ps := startServer(b, "--appendonly", "no")
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := b.N
	job := backend.NewJob{Type: "bench", Queue: "bench", Payload: benchPayload}
	b.ResetTimer()

	phase := func(name string, jobs int, run func()) {
		cpu0, cmd0, calls0 := redisTimes(b, s)
		by0 := commandTimes(b, s)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		own0 := processCPU()
		start := time.Now()
		run()
		el := time.Since(start)
		own1 := processCPU()
		runtime.ReadMemStats(&m1)
		cpu1, cmd1, calls1 := redisTimes(b, s)
		if testing.Verbose() {
			var l []string
			for c, us := range commandTimes(b, s) {
				if d := (us - by0[c]) / float64(jobs); d >= 0.05 {
					l = append(l, c+" "+strconv.FormatFloat(d, 'f', 2, 64))
				}
			}
			slices.Sort(l)
			b.Logf("%s: µs per job by command: %s", name, strings.Join(l, ", "))
		}
		b.ReportMetric((cpu1-cpu0)/float64(jobs), name+"-cpu-µs/job")
		b.ReportMetric((cmd1-cmd0)/float64(jobs), name+"-cmd-µs/job")
		b.ReportMetric((own1-own0)/float64(jobs), name+"-go-µs/job")
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(jobs), name+"-go-allocs/job")
		b.ReportMetric(float64(jobs)/el.Seconds(), name+"-jobs/s")
		b.ReportMetric(float64(jobs)/max(1, calls1-calls0), name+"-jobs/script")
	}

	phase("enq", n, func() {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{job}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})

	phase("batch", n, func() {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				for {
					k := min(100, left.Add(-100)+100)
					if k <= 0 {
						return
					}
					jobs := make([]backend.NewJob, k)
					for i := range jobs {
						jobs[i] = job
					}
					if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})

	var leases [][]backend.CompleteItem
	phase("claim", 2*n, func() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"bench"}, Max: 50, Lease: time.Hour, WorkerID: "bench", Now: time.Now()})
					if err != nil {
						b.Error(err)
						return
					}
					if len(res.Jobs) == 0 {
						return
					}
					items := completeItems(res.Jobs)
					mu.Lock()
					leases = append(leases, items)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	})
	phase("complete", 2*n, func() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < len(leases); i = int(next.Add(1) - 1) {
					if _, err := s.Complete(ctx, backend.CompleteParams{Items: leases[i], Now: time.Now()}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})

	// The same number of jobs again, for a worker to drain.
	for left := 2 * n; left > 0; left -= 1000 {
		jobs := make([]backend.NewJob, min(1000, left))
		for i := range jobs {
			jobs[i] = job
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	cs := &countingStore{Store: s}
	var ran atomic.Int64
	mux := kyu.NewMux()
	mux.HandleFunc("bench", func(context.Context, *kyu.Job) error { ran.Add(1); return nil })
	w, err := kyu.NewWorker(cs, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{"bench": 50}})
	if err != nil {
		b.Fatal(err)
	}
	phase("drain50", 2*n, func() {
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		waitFor(b, 5*time.Minute, "the drain", func() bool { return cs.completed.Load() >= int64(2*n) })
	})
	b.StopTimer()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Shutdown(sctx); err != nil {
		b.Error(err)
	}
	b.ReportMetric(float64(cs.claimed.Load())/float64(max(1, cs.claims.Load())), "jobs/claim")
	b.ReportMetric(float64(cs.completed.Load())/float64(max(1, cs.completes.Load())), "jobs/complete")
}

// countingStore counts the Claim (and ClaimWait) and Complete calls a
// worker makes.
type countingStore struct {
	*Store
	claims, claimed, completes, completed atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res, err := c.Store.Claim(ctx, p)
	c.claims.Add(1)
	c.claimed.Add(int64(len(res.Jobs)))
	return res, err
}

func (c *countingStore) ClaimWait(ctx context.Context, p backend.ClaimParams) (backend.ClaimResult, error) {
	res, err := c.Store.ClaimWait(ctx, p)
	c.claims.Add(1)
	c.claimed.Add(int64(len(res.Jobs)))
	return res, err
}

func (c *countingStore) Complete(ctx context.Context, p backend.CompleteParams) (backend.BatchResult, error) {
	res, err := c.Store.Complete(ctx, p)
	c.completes.Add(1)
	if err == nil {
		c.completed.Add(int64(len(p.Items)))
	}
	return res, err
}

// processCPU returns this process's CPU time (user + system), in µs.
func processCPU() float64 { return float64(cputime.Process().Nanoseconds()) / 1e3 }

// commandTimes returns the time each command took (commandstats' usec),
// in µs, by name; a script's commands count both on their own and in the
// script's time.
func commandTimes(b *testing.B, s *Store) map[string]float64 {
	out, err := s.client.Do(context.Background(), s.client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]float64{}
	for _, l := range strings.Split(out, "\r\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				x, _ := strconv.ParseFloat(v, 64)
				m[strings.TrimPrefix(name, "cmdstat_")] = x
			}
		}
	}
	return m
}

// redisTimes returns the server's CPU time (used_cpu_user + used_cpu_sys)
// and the time its scripts took (commandstats' usec of EVAL, EVALSHA and
// FCALL), both in µs, and how many scripts ran.
func redisTimes(b *testing.B, s *Store) (cpu, cmd, calls float64) {
	ctx := context.Background()
	out, err := s.client.Do(ctx, s.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(out, "\r\n") {
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(l, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				cpu += x * 1e6
			}
		}
	}
	out, err = s.client.Do(ctx, s.client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(out, "\r\n") {
		// Commands that scripts call are counted twice (on their own too),
		// so only the scripts' entry points count.
		name, _, _ := strings.Cut(l, ":")
		switch name {
		case "cmdstat_eval", "cmdstat_evalsha", "cmdstat_fcall", "cmdstat_fcall_ro":
		default:
			continue
		}
		for _, f := range strings.Split(l[strings.IndexByte(l, ':')+1:], ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				x, _ := strconv.ParseFloat(v, 64)
				cmd += x
			}
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				x, _ := strconv.ParseFloat(v, 64)
				calls += x
			}
		}
	}
	return cpu, cmd, calls
}
