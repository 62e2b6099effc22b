//go:build unix

package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/daemon"
)

func TestMain(m *testing.M) {
	// BenchmarkExec starts this binary as the daemon's guardian.
	daemon.ServeGuardianIfAsked()
	if os.Getenv(preforkChildEnv) == "1" {
		servePreforkChild()
	}
	os.Exit(m.Run())
}

// benchStore is an embedded store holding n pending jobs of type t.
func benchStore(b *testing.B, n int) *pebble.Store {
	b.Helper()
	st, err := pebble.Open(filepath.Join(b.TempDir(), "store"), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	c := kyu.NewClient(st, kyu.ClientConfig{})
	specs := make([]kyu.JobSpec, 0, 500)
	for left := n; left > 0; left -= len(specs) {
		specs = specs[:0]
		for range min(left, 500) {
			specs = append(specs, kyu.JobSpec{Type: "t", Payload: []byte(`{}`)})
		}
		if _, err := c.EnqueueMany(b.Context(), specs); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// cpuTime is the CPU time used so far by this process and its reaped
// children, user and system.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// selfCPUTime is the CPU time used so far by this process alone.
func selfCPUTime() time.Duration {
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano())
}

// report reports jobs/s and the CPU time per job of n jobs: in all (this
// process and its children), and of this process alone.
func report(b *testing.B, n int, elapsed, cpu, self time.Duration) {
	b.ReportMetric(float64(n)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/job")
	b.ReportMetric(float64(self.Microseconds())/float64(n), "self-µs/job")
}

// waitCount waits until count reaches n.
func waitCount(b *testing.B, n int64, count func() int64) {
	deadline := time.Now().Add(10 * time.Minute)
	for count() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d jobs done", count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// benchConcurrency is how many jobs the benchmarks run at once.
var benchConcurrency = 8

// BenchmarkExec drains b.N jobs from the embedded store, each run as a
// child process of /bin/true by the exec runner (8 at once, with the
// guardian kyu worker runs), and reports jobs/s.
func BenchmarkExec(b *testing.B) {
	st := benchStore(b, b.N)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	g, err := daemon.StartGuardian(exe, log)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	d, err := daemon.New(st, daemon.Config{Concurrency: benchConcurrency, Logger: log, Guard: benchGuard(g),
		Handlers: map[string]daemon.HandlerConfig{"t": {Command: []string{"/bin/true"}}}})
	if err != nil {
		b.Fatal(err)
	}
	runDaemon(b, d)
}

// BenchmarkGoHandler is BenchmarkExec's baseline: the same jobs drained by
// a kyu.Worker with a Go handler that does nothing, 8 at once.
func BenchmarkGoHandler(b *testing.B) {
	st := benchStore(b, b.N)
	w, err := kyu.NewWorker(st, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
		Queues:  map[string]int{"default": 8},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu, self := time.Now(), cpuTime(), selfCPUTime()
	if err := w.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	waitCount(b, int64(b.N), func() int64 { return w.Stats().Processed })
	elapsed, cpu, self := time.Since(start), cpuTime()-cpu, selfCPUTime()-self
	b.StopTimer()
	if err := w.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	report(b, b.N, elapsed, cpu, self)
}

// BenchmarkBareExec is the floor under BenchmarkExec: /bin/true started
// and waited for by benchConcurrency goroutines, with no store and no
// pipes.
func BenchmarkBareExec(b *testing.B) {
	var next atomic.Int64
	start, cpu, self := time.Now(), cpuTime(), selfCPUTime()
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	report(b, b.N, time.Since(start), cpuTime()-cpu, selfCPUTime()-self)
}

func benchGuard(g *daemon.Guardian) daemon.Guard {
	if os.Getenv("NOGUARD") != "" {
		return nil
	}
	return g
}

// BenchmarkHTTP drains b.N jobs from the embedded store through the http
// runner, 8 at once, against a no-op server in this process.
func BenchmarkHTTP(b *testing.B) {
	st := benchStore(b, b.N)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := daemon.New(st, daemon.Config{Concurrency: benchConcurrency, Logger: log,
		Handlers: map[string]daemon.HandlerConfig{"t": {URL: srv.URL}}})
	if err != nil {
		b.Fatal(err)
	}
	runDaemon(b, d)
}

// BenchmarkPrefork drains b.N jobs from the embedded store through the
// prefork runner: 4 compiled no-op children (this test binary), with the
// default Prefetch.
func BenchmarkPrefork(b *testing.B) { benchPrefork(b, 0) }

// BenchmarkPreforkPrefetch8 is BenchmarkPrefork with 8 jobs claimed ahead
// per child, as for jobs this short.
func BenchmarkPreforkPrefetch8(b *testing.B) { benchPrefork(b, 8) }

func benchPrefork(b *testing.B, prefetch int) {
	st := benchStore(b, b.N)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv(preforkChildEnv, "1")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := daemon.New(st, daemon.Config{Concurrency: 4, Prefetch: prefetch, Logger: log,
		Handlers: map[string]daemon.HandlerConfig{"t": {Command: []string{exe}, Prefork: 4}}})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := runDaemon(b, d)
	// The children are reaped once the daemon has stopped: their CPU time
	// counts from then on.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "children-incl-µs/job")
}

// runDaemon runs d until it has run b.N jobs, timing that alone, stops it
// and reports the figures; it returns the process's CPU time at the start.
func runDaemon(b *testing.B, d *daemon.Daemon) time.Duration {
	b.ResetTimer()
	start, cpu, self := time.Now(), cpuTime(), selfCPUTime()
	cpu0 := cpu
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	waitCount(b, int64(b.N), d.Jobs)
	elapsed, cpu, self := time.Since(start), cpuTime()-cpu, selfCPUTime()-self
	b.StopTimer()
	d.Stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	report(b, b.N, elapsed, cpu, self)
	return cpu0
}
