package mysql

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// serverPID finds the local MySQL or MariaDB server process, or 0 when
// none runs on this machine (or /proc is missing): the benchmarks then
// report only the client's CPU.
func serverPID() int {
	stats, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(b)); name == "mariadbd" || name == "mysqld" {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if err == nil {
				return pid
			}
		}
	}
	return 0
}

// serverCPU reads the CPU time process pid has used; ok is false when it
// cannot.
func serverCPU(pid int) (d time.Duration, ok bool) {
	if pid == 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	shut := bytes.LastIndexByte(b, ')')
	if shut < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[shut+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	s, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	// Clock ticks of 10 ms (USER_HZ 100 on Linux).
	return time.Duration(u+s) * 10 * time.Millisecond, true
}

// clientCPU is the CPU time this process has used.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the CPU time of the server and of this process over
// a span of work.
type cpuMeter struct {
	server, client time.Duration
	serverOK       bool
}

func startCPU(pid int) cpuMeter {
	s, ok := serverCPU(pid)
	return cpuMeter{server: s, client: clientCPU(), serverOK: ok}
}

// BenchmarkDrainCPU measures the CPU per job of a batch enqueue (100 jobs
// per call) and of a drain (claims of up to 25 jobs by 8 goroutines, each
// batch completed in one call), for the server (when it runs on this
// machine) and for this process. 100-byte payloads; b.N rounds of 5,000
// jobs. The server's figure counts the work of all its clients: it means
// something only while nothing else uses the server.
//
//	go test -run '^$' -bench DrainCPU -benchtime 4x ./backend/mysql/
func BenchmarkDrainCPU(b *testing.B) {
	const jobs, batch, claimers, claimMax = 5000, 100, 8, 25
	s := openTestStore(b, Options{MaxConns: 2 * claimers})
	ctx := b.Context()
	pid := serverPID()
	payload := make([]byte, 100)
	var enqCPU, drainCPU [2]time.Duration
	add := func(m cpuMeter, to *[2]time.Duration) {
		if sv, ok := serverCPU(pid); ok && m.serverOK {
			to[0] += sv - m.server
		}
		to[1] += clientCPU() - m.client
	}
	b.ResetTimer()
	for range b.N {
		enq := startCPU(pid)
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		for w := range claimers {
			wg.Go(func() {
				for i := w * batch; i < jobs; i += claimers * batch {
					nj := make([]backend.NewJob, batch)
					for k := range nj {
						nj[k] = backend.NewJob{Type: "t", Queue: "q", Payload: payload}
					}
					if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: nj, Now: time.Now()}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		add(enq, &enqCPU)
		drain := startCPU(pid)
		var mu sync.Mutex
		done := 0
		for range claimers {
			wg.Go(func() {
				for {
					c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: claimMax, Lease: time.Minute, Now: time.Now()})
					if err != nil {
						errs <- err
						return
					}
					if len(c.Jobs) == 0 {
						return
					}
					items := make([]backend.CompleteItem, len(c.Jobs))
					for i, j := range c.Jobs {
						items[i] = backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}
					}
					res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: time.Now()})
					if err != nil {
						errs <- err
						return
					}
					for _, e := range res.Errors {
						if e != nil {
							errs <- e
							return
						}
					}
					mu.Lock()
					done += len(items)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		add(drain, &drainCPU)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if done != jobs {
			b.Fatalf("drained %d jobs of %d", done, jobs)
		}
	}
	b.StopTimer()
	n := float64(b.N * jobs)
	if pid != 0 {
		b.ReportMetric(float64(enqCPU[0].Microseconds())/n, "enqueue-server-µs/job")
		b.ReportMetric(float64(drainCPU[0].Microseconds())/n, "drain-server-µs/job")
	}
	b.ReportMetric(float64(enqCPU[1].Microseconds())/n, "enqueue-client-µs/job")
	b.ReportMetric(float64(drainCPU[1].Microseconds())/n, "drain-client-µs/job")
}
