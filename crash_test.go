package kyu_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/pebble"
)

// workerCrashDirEnv names the store directory of TestWorkerCrashChild.
const workerCrashDirEnv = "KYU_WORKER_CRASH_DIR"

// The shape of the crash run.
const (
	crashJobs        = 2000                  // jobs the child enqueues
	crashBatch       = 50                    // jobs per EnqueueMany call
	crashBurst       = 10                    // batches enqueued at once, before pacing
	crashPace        = 10 * time.Millisecond // between later batches, so the kill lands mid-enqueue
	crashConcurrency = 20                    // the child worker's concurrency
	crashLease       = time.Second           // the child worker's lease
	crashKillAfter   = 300                   // "started" lines before SIGKILL
	crashFailEvery   = 10                    // every 10th job fails its first attempt
	crashChildLife   = 60 * time.Second      // a child never killed gives up then
	crashStall       = 20 * time.Second      // the parent kills a child that stalls
	crashRecoverWait = 30 * time.Second      // bound on recovery after the kill
)

// TestWorkerCrashChild is the child process of TestWorkerCrash: it runs a
// Worker on the store in $KYU_WORKER_CRASH_DIR and enqueues crashJobs jobs
// into it, printing one line per event, each in a single write so a kill
// never leaves half a line:
//
//	enqueued ID   after EnqueueMany returned the job's id
//	started ID    when a handler begins an attempt of the job
//
// The first crashBurst batches go in at once, the rest one every crashPace,
// so the kill usually falls while jobs are still being enqueued. The child
// never finishes on its own before crashChildLife; the parent kills it.
func TestWorkerCrashChild(t *testing.T) {
	dir := os.Getenv(workerCrashDirEnv)
	if dir == "" {
		t.Skip("run by TestWorkerCrash")
	}
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	var outMu sync.Mutex
	emit := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		outMu.Lock()
		defer outMu.Unlock()
		if _, err := os.Stdout.WriteString(line); err != nil {
			panic(err)
		}
	}

	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			emit("started %s", job.ID)
			n, err := strconv.Atoi(string(job.Payload))
			if err != nil {
				return kyu.Permanent(err)
			}
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			if n%crashFailEvery == 0 && job.Attempt == 1 {
				return fmt.Errorf("job %d fails its first attempt", n)
			}
			return nil
		}),
		Queues:              map[string]int{"default": crashConcurrency},
		Lease:               crashLease,
		Backoff:             kyu.FixedBackoff(0),
		PollInterval:        50 * time.Millisecond,
		MaintenanceInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}

	c := kyu.NewClient(s, kyu.ClientConfig{})
	for first := 0; first < crashJobs; first += crashBatch {
		if first >= crashBurst*crashBatch {
			time.Sleep(crashPace)
		}
		jobs := make([]kyu.JobSpec, crashBatch)
		for i := range jobs {
			jobs[i] = kyu.JobSpec{Type: "crash", Payload: []byte(strconv.Itoa(first + i))}
		}
		res, err := c.EnqueueMany(ctx, jobs)
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		for _, r := range res {
			emit("enqueued %s", r.ID)
		}
	}
	time.Sleep(crashChildLife) // the parent kills us long before
	t.Fatalf("child was not killed within %s", crashChildLife)
}

// startCrashChild starts this test binary running only the test named
// child, with env added to its environment, and returns it with its
// stdout to read and its stderr kept; the test's cleanup kills it.
func startCrashChild(t *testing.T, child, env string) (*exec.Cmd, io.Reader, *logBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), env)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, stdout, stderr
}

// TestWorkerCrash runs a Client and a Worker in a child process on a real
// directory, kills the child with SIGKILL while jobs are running, reopens
// the directory and checks that no acknowledged job was lost and that a
// new Worker brings every job to completed, running again the jobs that
// were active at the kill once their leases expire.
func TestWorkerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd, stdout, stderr := startCrashChild(t, "TestWorkerCrashChild", workerCrashDirEnv+"="+dir)
	// A child that stalls is killed at a deadline; the test then fails
	// below for having been killed before enough jobs started.
	var stalled atomic.Bool
	stall := time.AfterFunc(crashStall, func() {
		stalled.Store(true)
		_ = cmd.Process.Kill()
	})
	defer stall.Stop()

	var (
		enqueued []string // acknowledged ids, in order
		started  = map[string]bool{}
		other    []string // anything else on stdout: the test framework's output
		killed   bool
	)
	start := time.Now()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "enqueued":
			enqueued = append(enqueued, f[1])
		case len(f) == 2 && f[0] == "started":
			started[f[1]] = true
			if len(started) == crashKillAfter && !killed {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatalf("kill child: %v", err)
				}
				killed = true
			}
		default:
			other = append(other, sc.Text())
		}
	}
	waitErr := cmd.Wait()
	stall.Stop()
	childOutput := func() string {
		return fmt.Sprintf("child exit: %v\nchild stdout (other lines):\n%s\nchild stderr:\n%s",
			waitErr, strings.Join(other, "\n"), stderr.String())
	}
	switch {
	case stalled.Load():
		t.Fatalf("child stalled: killed after %s with %d jobs started, %d enqueued\n%s",
			crashStall, len(started), len(enqueued), childOutput())
	case !killed:
		t.Fatalf("child exited by itself with %d jobs started, %d enqueued\n%s",
			len(started), len(enqueued), childOutput())
	case sc.Err() != nil:
		t.Fatalf("read child stdout: %v", sc.Err())
	}
	killedAt := time.Since(start)

	// Every acknowledged job survived the kill; every started one kept its
	// claim (Attempt counted). Jobs still active are those the kill cut off.
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	// The store must be durable: the in-memory one would lose every job
	// with the child.
	t.Cleanup(func() { _ = s.Close() })
	c := kyu.NewClient(s, kyu.ClientConfig{})
	ctx := context.Background()
	get := func(id string) *kyu.Job {
		t.Helper()
		j, err := c.Get(ctx, id)
		if errors.Is(err, kyu.ErrNotFound) {
			t.Fatalf("acknowledged job %s lost after the kill", id)
		}
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return j
	}
	atKill := map[kyu.State]int{}
	var activeAtKill []string
	// claimedAhead counts the jobs active at the kill that no handler had
	// started: claimed ahead (WorkerConfig.ClaimAhead), waiting for one.
	claimedAhead := 0
	for _, id := range enqueued {
		j := get(id)
		atKill[j.State]++
		if started[id] && j.Attempt < 1 {
			t.Errorf("job %s was started but is %s with attempt %d: its claim was lost", id, j.State, j.Attempt)
		}
		if j.State == kyu.StateActive {
			activeAtKill = append(activeAtKill, id)
			if !started[id] {
				claimedAhead++
			}
		}
	}
	if len(activeAtKill) == 0 {
		t.Fatalf("no job was active at the kill (states %v); the test proves nothing about recovery", atKill)
	}

	// A new worker, with a lease long enough for any handler here, finishes
	// everything once the child's leases (crashLease) have expired.
	var reruns atomic.Int64
	startWorker(t, s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			reruns.Add(1)
			return nil
		}),
		Queues:              map[string]int{"default": crashConcurrency},
		Backoff:             kyu.FixedBackoff(0),
		PollInterval:        50 * time.Millisecond,
		MaintenanceInterval: 50 * time.Millisecond,
	})
	// The store signals each job that ends; the jobs are read again at
	// each signal until every one has completed.
	recoverStart := time.Now()
	watchCtx, cancelWatch := context.WithTimeout(ctx, crashRecoverWait)
	defer cancelWatch()
	ended, err := s.WatchFinished(watchCtx, backend.WatchParams{IDs: enqueued})
	if err != nil {
		t.Fatalf("watch the jobs: %v", err)
	}
	defer ended.Close()
	left := enqueued
	for len(left) > 0 {
		states := map[kyu.State]int{}
		var notDone []string
		for _, id := range left {
			j := get(id)
			states[j.State]++
			if j.State != kyu.StateCompleted {
				notDone = append(notDone, id)
			}
		}
		if left = notDone; len(left) == 0 {
			break
		}
		select {
		case <-ended.C:
		case <-watchCtx.Done():
			j := get(left[0])
			t.Fatalf("after %s, %d acknowledged jobs are not completed (states %v); e.g. job %s is %s, attempt %d, worker %q, errors %+v",
				crashRecoverWait, len(left), states, j.ID, j.State, j.Attempt, j.WorkerID, j.Errors)
		}
	}
	recovered := time.Since(recoverStart)

	// Every job the kill left active came back through lease recovery: its
	// cut-off attempt is recorded as lease_expired and it ran again.
	for _, id := range activeAtKill {
		j := get(id)
		expired := slices.ContainsFunc(j.Errors, func(e kyu.AttemptError) bool { return e.Kind == backend.AttemptLeaseExpired })
		if !expired || j.Attempt < 2 {
			t.Errorf("job %s was active at the kill but ended at attempt %d with errors %+v; want attempt >= 2 and a lease_expired error",
				id, j.Attempt, j.Errors)
		}
	}
	// Retries ran too: some job failed an attempt and still completed.
	retried := 0
	for _, id := range enqueued {
		j := get(id)
		if slices.ContainsFunc(j.Errors, func(e kyu.AttemptError) bool { return e.Kind == backend.AttemptFailed }) {
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("no completed job records a failed attempt; the child's retries never ran")
	}
	t.Logf("killed after %s: %d enqueued, %d started, states at kill %v; %d active jobs (%d of them claimed ahead, not started) recovered, %d retried; all completed %s later (%d runs in the new worker)",
		killedAt.Round(time.Millisecond), len(enqueued), len(started), atKill, len(activeAtKill), claimedAhead, retried,
		recovered.Round(time.Millisecond), reruns.Load())
}

// claimAheadCrashDirEnv names the store directory of
// TestClaimAheadCrashChild.
const claimAheadCrashDirEnv = "KYU_CLAIM_AHEAD_CRASH_DIR"

// The shape of the claim-ahead crash run: one handler, blocked for good
// on the first job, and claimAheadCrashAhead jobs claimed ahead behind it.
const (
	claimAheadCrashJobs  = 6
	claimAheadCrashAhead = 3
)

// TestClaimAheadCrashChild is the child process of TestClaimAheadCrash: it
// runs a worker with one handler on the store in
// $KYU_CLAIM_AHEAD_CRASH_DIR, lets it run one quick job, then enqueues
// claimAheadCrashJobs jobs whose handler blocks. It prints "started ID"
// for each of them a handler starts and "claimed N" once N jobs are
// active, then waits to be killed.
func TestClaimAheadCrashChild(t *testing.T) {
	dir := os.Getenv(claimAheadCrashDirEnv)
	if dir == "" {
		t.Skip("run by TestClaimAheadCrash")
	}
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	c := kyu.NewClient(s, kyu.ClientConfig{})
	ctx := context.Background()
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			if job.Type == "quick" {
				return nil
			}
			fmt.Printf("started %s\n", job.ID)
			select {} // until the kill
		}),
		Queues:     map[string]int{"default": 1},
		ClaimAhead: claimAheadCrashAhead,
		Lease:      crashLease,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// A quick job first: a pool claims ahead once its handlers have been
	// seen to run short.
	quick, err := c.Enqueue(ctx, "quick", nil, kyu.EnqueueOptions{})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if _, err := c.Wait(ctx, quick.ID); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	jobs := make([]kyu.JobSpec, claimAheadCrashJobs)
	for i := range jobs {
		jobs[i] = kyu.JobSpec{Type: "crash"}
	}
	if _, err := c.EnqueueMany(ctx, jobs); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for deadline := time.Now().Add(crashChildLife); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := c.Stats(ctx, 0)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if len(st.Queues) == 1 && st.Queues[0].Counts[kyu.StateActive] == 1+claimAheadCrashAhead {
			fmt.Printf("claimed %d\n", 1+claimAheadCrashAhead)
			break
		}
	}
	time.Sleep(crashChildLife) // the parent kills us long before
	t.Fatalf("child was not killed within %s", crashChildLife)
}

// TestClaimAheadCrash kills with SIGKILL a worker holding jobs claimed
// ahead of its one busy handler, and checks that those jobs, active in
// the store though no handler started them, come back through lease
// recovery and complete under a new worker.
func TestClaimAheadCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd, stdout, stderr := startCrashChild(t, "TestClaimAheadCrashChild", claimAheadCrashDirEnv+"="+dir)
	stall := time.AfterFunc(crashStall, func() { _ = cmd.Process.Kill() })
	defer stall.Stop()
	started := map[string]bool{}
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "started":
			started[f[1]] = true
		case len(f) == 2 && f[0] == "claimed" && !killed:
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed = true
		}
	}
	waitErr := cmd.Wait()
	if !killed || len(started) != 1 {
		t.Fatalf("child ended (%v) with %d handlers started, killed %v\nstderr:\n%s", waitErr, len(started), killed, stderr.String())
	}

	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := kyu.NewClient(s, kyu.ClientConfig{})
	ctx := context.Background()
	page, err := c.List(ctx, kyu.ListOptions{State: kyu.StateActive, Limit: 100})
	if err != nil {
		t.Fatalf("list active jobs: %v", err)
	}
	var ahead, all []string
	for _, j := range page.Jobs {
		all = append(all, j.ID)
		if !started[j.ID] {
			ahead = append(ahead, j.ID)
		}
	}
	if len(ahead) != claimAheadCrashAhead {
		t.Fatalf("%d active jobs at the kill, %d of them not started; want %d claimed ahead", len(all), len(ahead), claimAheadCrashAhead)
	}
	startWorker(t, s, kyu.WorkerConfig{
		Handler:             kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil }),
		Queues:              map[string]int{"default": 2},
		PollInterval:        50 * time.Millisecond,
		MaintenanceInterval: 50 * time.Millisecond,
	})
	waitAllFinal(t, s, all)
	for _, id := range ahead {
		j, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		expired := slices.ContainsFunc(j.Errors, func(e kyu.AttemptError) bool { return e.Kind == backend.AttemptLeaseExpired })
		if j.State != kyu.StateCompleted || !expired {
			t.Errorf("job %s claimed ahead at the kill ended %s at attempt %d with errors %+v; want completed after a lease_expired attempt",
				id, j.State, j.Attempt, j.Errors)
		}
	}
}
