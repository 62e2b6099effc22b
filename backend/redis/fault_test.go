package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
)

// The shape of the fault run.
const (
	faultJobs        = 3000 // at least, in batches; the producers go on until the faults are over
	faultSingles     = 3    // goroutines enqueueing one job per call
	faultBatch       = 20
	faultConcurrency = 20
	faultLease       = 6 * time.Second
)

// TestFaults runs a Worker on a private redis-server (durable: AOF with an
// fsync per write) while a producer enqueues, and meanwhile kills and
// restarts the server, kills every client connection and makes the server
// sleep. Every acknowledged job must complete, the store must hold no job
// but those (an enqueue tried again after its reply was lost writes none
// twice), and no job may ever run in two handlers at once (two live
// leases).
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a redis-server")
	}
	ps := startServer(t, "--appendonly", "yes", "--appendfsync", "always", "--enable-debug-command", "local")
	// Warnings (retries, lost subscriptions) are kept, and shown if the
	// test fails.
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Calls retry for well under the time each step is given, so that a
	// call that keeps failing ends with its error (the producer's fails
	// the test, the worker's are logged) before the step's wait runs out.
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}, Prefix: "kyufault", RetryFor: 20 * time.Second, Logger: logger})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()

	var (
		mu          sync.Mutex
		running     = map[string]int{}
		overlaps    []string
		done        = map[string]bool{}
		completions atomic.Int64
	)
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			mu.Lock()
			running[job.ID]++
			if running[job.ID] > 1 {
				overlaps = append(overlaps, job.ID)
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				running[job.ID]--
				done[job.ID] = true
				mu.Unlock()
				completions.Add(1)
			}()
			// A little work, cut short when the worker gives the job up.
			n, _ := strconv.Atoi(string(job.Payload))
			t := time.NewTimer(time.Duration(n%5) * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}),
		Queues:              map[string]int{"faults": faultConcurrency},
		Lease:               faultLease,
		Backoff:             kyu.FixedBackoff(0),
		PollInterval:        100 * time.Millisecond,
		MaintenanceInterval: 200 * time.Millisecond,
		Logger:              logger,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer w.Shutdown(context.Background())

	// The producers pace their calls so that the faults land mid-stream,
	// and go on until they are over (stopProducer), so that each fault
	// finds jobs to work on however long the steps take.
	client := kyu.NewClient(s, kyu.ClientConfig{})
	var (
		ids         []string
		producerErr atomic.Pointer[error] // the first error a producer stopped on
	)
	stopProducer := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stopProducer:
			return true
		default:
			return false
		}
	}
	var producers sync.WaitGroup
	producers.Go(func() {
		for first := 0; first < faultJobs || !stopped(); first += faultBatch {
			specs := make([]kyu.JobSpec, faultBatch)
			for i := range specs {
				specs[i] = kyu.JobSpec{Type: "fault", Payload: []byte(strconv.Itoa(first + i)), EnqueueOptions: kyu.EnqueueOptions{Queue: "faults"}}
			}
			res, err := client.EnqueueMany(ctx, specs)
			if err != nil {
				producerErr.CompareAndSwap(nil, &err)
				return
			}
			mu.Lock()
			for _, r := range res {
				ids = append(ids, r.ID)
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // pacing, not synchronisation
		}
	})
	// Single enqueues too, from a few goroutines: their runs go on
	// connections of their own (runconn.go), which the faults break.
	for range faultSingles {
		producers.Go(func() {
			for n := 0; !stopped(); n++ {
				r, err := client.Enqueue(ctx, "fault", []byte(strconv.Itoa(n)), kyu.EnqueueOptions{Queue: "faults"})
				if err != nil {
					producerErr.CompareAndSwap(nil, &err)
					return
				}
				mu.Lock()
				ids = append(ids, r.ID)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // pacing, not synchronisation
			}
		})
	}

	// A failed run says where the jobs stand (deferred, so it runs before
	// the worker and the store are closed).
	defer func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		acked := len(ids)
		mu.Unlock()
		st, err := s.Stats(context.Background(), backend.StatsParams{Now: time.Now()})
		t.Logf("on failure: %d jobs acknowledged, %d handler runs, stats %+v (err %v)", acked, completions.Load(), st.Queues, err)
		t.Logf("the last warnings:\n%s", logs.tail(8<<10))
	}()
	progress := func(what string) {
		t.Helper()
		from := completions.Load()
		waitFor(t, time.Minute, "jobs to complete after "+what, func() bool {
			if err := producerErr.Load(); err != nil {
				t.Fatalf("enqueue after %s: %v", what, *err)
			}
			return completions.Load() >= from+100
		})
	}
	progress("the start")

	// 1. Kill the server (SIGKILL) and start it again on the same port
	// and files: the AOF holds every acknowledged write.
	ps.kill()
	ps.start()
	progress("a server restart")

	// 2. Cut every client connection.
	if out, err := ps.cli("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatalf("CLIENT KILL: %v %s", err, out)
	}
	if out, err := ps.cli("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v %s", err, out)
	}
	progress("CLIENT KILL")

	// 3. Stall the server for a second (less than a heartbeat's margin).
	if out, err := ps.cli("DEBUG", "SLEEP", "1"); err != nil {
		t.Fatalf("DEBUG SLEEP: %v %s", err, out)
	}
	progress("DEBUG SLEEP")

	close(stopProducer)
	producers.Wait()
	if err := producerErr.Load(); err != nil {
		t.Fatalf("enqueue: %v", *err)
	}
	mu.Lock()
	all := append([]string(nil), ids...)
	mu.Unlock()
	if len(all) < faultJobs {
		t.Fatalf("%d jobs acknowledged, want at least %d", len(all), faultJobs)
	}
	// Every acknowledged job reaches completed (a job whose claim or
	// completion was cut off runs again once its lease expires).
	left := func() []string {
		var out []string
		for _, id := range all {
			j, err := s.Get(ctx, backend.GetParams{ID: id})
			if err != nil || j.State != backend.StateCompleted {
				out = append(out, id)
			}
		}
		return out
	}
	waitFor(t, 90*time.Second, "every acknowledged job to complete", func() bool { return len(left()) == 0 })

	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("%d jobs ran in two handlers at once (two live leases), first %s", len(overlaps), overlaps[0])
	}
	for _, id := range all {
		if !done[id] {
			t.Fatalf("job %s is completed but no handler ran it", id)
		}
	}
	// Nothing but the acknowledged jobs: an enqueue tried again after its
	// reply was lost wrote none a second time under a new id.
	st, err := s.Stats(ctx, backend.StatsParams{Now: time.Now()})
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	var stored int64
	for _, q := range st.Queues {
		for _, n := range q.Counts {
			stored += n
		}
	}
	if stored != int64(len(all)) {
		t.Fatalf("the store holds %d jobs, want the %d acknowledged", stored, len(all))
	}
	t.Logf("%d jobs completed through a restart, CLIENT KILL and DEBUG SLEEP; %d handler runs", len(all), completions.Load())
}

// lockedBuffer is a log's destination that many goroutines write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is at most the last n bytes written.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf.Bytes()
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
