//go:build unix

package faktory_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend/pebble"
)

// nodeThroughputEnv names the job count of TestNodeWorkerThroughput; the
// test runs only when it is set.
const nodeThroughputEnv = "KYU_TEST_NODE_THROUGHPUT"

// nodeThroughputWorkersEnv names the number of Node worker processes of
// TestNodeWorkerThroughput (default 1).
const nodeThroughputWorkersEnv = "KYU_TEST_NODE_WORKERS"

// TestNodeWorkerThroughput measures the Node worker (faktory-worker,
// concurrency 20) running no-op jobs through kyu on the embedded store
// (backend/pebble), from its start to the
// last job completed, and the CPU the Node process and this process
// (the kyu server, and the test's polling) spent meanwhile:
//
//	KYU_TEST_NODE_THROUGHPUT=20000 go test -run TestNodeWorkerThroughput -v ./server/faktory/
func TestNodeWorkerThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	n := envInt(t, nodeThroughputEnv, 0)
	if n == 0 {
		t.Skipf("set %s to a job count to measure", nodeThroughputEnv)
	}
	// The embedded store, as kyu server runs by default: the memory
	// store's claims scan every job, and slow down as they pile up.
	store, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := newNodeEnvOver(t, store)
	start := time.Now()
	e.push(n, fmt.Sprintf("COUNT=%d", n), "BATCH=1000", "PREFIX=tp")
	pushed := time.Since(start)

	procs := envInt(t, nodeThroughputWorkersEnv, 1)
	before := selfCPU(t)
	ws := make([]*nodeProc, procs)
	for i := range ws {
		ws[i] = e.start("worker.js", "CONCURRENCY=20", fmt.Sprintf("WID=node-tp%d", i), "LOG_RUNS=0")
	}
	for _, w := range ws {
		w.waitEvents("ready", 1, 30*time.Second)
	}
	start = time.Now()
	e.waitCompleted("default", n, 10*time.Minute)
	ran := time.Since(start)
	server := selfCPU(t) - before
	var node time.Duration
	for i, w := range ws {
		e.api(http.MethodPost, fmt.Sprintf("/api/v1/workers/node-tp%d/stop", i), nil)
		if err := w.wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		node += w.cmd.ProcessState.UserTime() + w.cmd.ProcessState.SystemTime()
	}
	t.Logf("Node producer: %d jobs pushed (PUSHB of 1000) in %v: %.0f jobs/s", n, pushed.Round(time.Millisecond), float64(n)/pushed.Seconds())
	t.Logf("%d Node worker(s), concurrency 20: %d no-op jobs in %v: %.0f jobs/s", procs, n, ran.Round(time.Millisecond), float64(n)/ran.Seconds())
	t.Logf("CPU: node %v (whole process lives), kyu server and test %v over the run's %v",
		node.Round(time.Millisecond), server.Round(time.Millisecond), ran.Round(time.Millisecond))
}

// selfCPU returns the CPU time this process has used.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
