//go:build unix

package daemon_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/daemon"
)

// preforkChildEnv makes this test binary a no-op prefork child (see
// TestMain): for BenchmarkPrefork, a compiled child.
const preforkChildEnv = "KYU_TEST_PREFORK_CHILD"

// servePreforkChild answers every job line with {"done":true}.
func servePreforkChild() {
	control := bufio.NewWriter(os.NewFile(3, "control"))
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		control.WriteString("{\"done\":true}\n")
		if control.Flush() != nil {
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// TestPrefork checks the prefork runner with the sh example child: jobs
// run in long-lived children, each replaced after max_jobs_per_child; an
// error answer without retry fails the job; a child dying mid-job has its
// job retried and is replaced.
func TestPrefork(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	example, err := filepath.Abs("../examples/worker/prefork.sh")
	if err != nil {
		t.Fatal(err)
	}
	dying := bd.script("dying.sh", `while IFS= read -r job; do
case $job in *'"attempt":1'*) kill -9 $$ ;; esac
printf '{"done":true}\n' >&3
done`)
	bd.start(daemon.Config{Concurrency: 2, Handlers: map[string]daemon.HandlerConfig{
		"t":     {Command: []string{example}, Prefork: 2, MaxJobsPerChild: 3},
		"dying": {Command: []string{dying}, Prefork: 1, Retry: daemon.RetryPolicy{Backoff: daemon.BackoffFixed}},
	}})

	var ids []string
	for range 12 {
		ids = append(ids, bd.enqueue("t", `{"n":1}`, kyu.EnqueueOptions{}))
	}
	perChild := map[int]int{}
	for _, id := range ids {
		j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
		var res struct{ Child int }
		if err := json.Unmarshal(j.Result, &res); err != nil || res.Child == 0 {
			t.Fatalf("result %s; want the child's pid", j.Result)
		}
		perChild[res.Child]++
		if len(j.Logs) != 1 || !strings.Contains(j.Logs[0].Line, "took a job") {
			t.Errorf("logs %+v; want the child's output line", j.Logs)
		}
	}
	for pid, n := range perChild {
		if n > 3 {
			t.Errorf("child %d ran %d jobs; want at most max_jobs_per_child, 3", pid, n)
		}
	}
	if len(perChild) < 4 {
		t.Errorf("%d children ran 12 jobs; want at least 4", len(perChild))
	}

	bad := bd.enqueue("t", ``, kyu.EnqueueOptions{})
	j := bd.waitJob(bad, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
	if lastError(j) != "no payload" {
		t.Errorf("error %q; want the child's", lastError(j))
	}

	id := bd.enqueue("dying", `{}`, kyu.EnqueueOptions{})
	j = bd.waitJob(id, "completed on its retry", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Message != "prefork child died mid-job: killed by signal SIGKILL" {
		t.Errorf("attempt %d, errors %+v; want the second attempt after the child's death", j.Attempt, j.Errors)
	}
}

// TestPreforkTimeout checks that a job timing out in a prefork child
// stops the child's group and fails the attempt, and that the next job
// gets a fresh child.
func TestPreforkTimeout(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("slow.sh", `while IFS= read -r job; do
case $job in *slow*) echo $$ > "$DIR/slow"; sleep 60 ;; esac
printf '{"done":true}\n' >&3
done`)
	bd.start(daemon.Config{KillGrace: 200 * time.Millisecond, Handlers: map[string]daemon.HandlerConfig{
		"t": {Command: []string{h}, Prefork: 1, Timeout: 300 * time.Millisecond, Env: map[string]string{"DIR": bd.dir}},
	}})
	slow := bd.enqueue("t", `"slow"`, kyu.EnqueueOptions{MaxAttempts: 1})
	pid := readPID(t, filepath.Join(bd.dir, "slow"))
	j := bd.waitJob(slow, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
	if alive(pid) {
		t.Error("the timed-out child outlived its attempt")
	}
	if !strings.Contains(lastError(j), "timed out") {
		t.Errorf("error %q; want a timeout", lastError(j))
	}
	next := bd.enqueue("t", `"fast"`, kyu.EnqueueOptions{})
	bd.waitJob(next, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
}

// TestPrefetch checks the jobs claimed ahead of the prefork children
// (Config.Prefetch): they wait, so that no more than Concurrency jobs run
// at once, whatever their runner; at a graceful stop the running job
// finishes and they are handed back unrun, their attempts unused.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	wait := `while [ ! -e "$DIR/go" ]; do sleep 0.01; done`
	child := bd.script("child.sh", `while IFS= read -r job; do
touch "$DIR/started-prefork"
`+wait+`
printf '{"done":true}\n' >&3
done`)
	one := bd.script("one.sh", `touch "$DIR/started-$KYU_JOB_ID"; `+wait)
	env := map[string]string{"DIR": bd.dir}
	r := bd.start(daemon.Config{Concurrency: 1, Prefetch: 2, Handlers: map[string]daemon.HandlerConfig{
		"p": {Command: []string{child}, Prefork: 1, Env: env},
		"e": {Command: []string{one}, Env: env},
	}})
	ids := []string{
		bd.enqueue("p", `{}`, kyu.EnqueueOptions{}),
		bd.enqueue("e", `{}`, kyu.EnqueueOptions{}),
		bd.enqueue("e", `{}`, kyu.EnqueueOptions{}),
	}
	// Concurrency 1 plus 2 ahead for the one child: all three claimed.
	for _, id := range ids {
		bd.waitJob(id, "claimed", func(j *kyu.Job) bool { return j.State == kyu.StateActive })
	}
	started := func() []string {
		m, _ := filepath.Glob(filepath.Join(bd.dir, "started-*"))
		return m
	}
	eventually(t, "a job started", func() bool { return len(started()) > 0 })
	if s := started(); len(s) != 1 {
		t.Fatalf("%d jobs started at once (%v); want 1, the concurrency", len(s), s)
	}
	r.d.Stop()
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	completed, handedBack := 0, 0
	for _, id := range ids {
		if j, err := bd.c.Get(t.Context(), id); err == nil && j.State == kyu.StateCompleted {
			completed++
		} else if err == nil && j.State == kyu.StatePending && j.Attempt == 0 {
			handedBack++
		}
	}
	if completed != 1 || handedBack != 2 || len(started()) != 1 {
		t.Errorf("%d completed, %d handed back unspent, %d started; want the running job completed, the 2 waiting handed back unrun",
			completed, handedBack, len(started()))
	}
}

// TestPrefetchMaxJobs checks that MaxJobs counts the jobs run, not those
// claimed ahead: the daemon runs exactly MaxJobs, and hands the others
// back unrun.
func TestPrefetchMaxJobs(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	child := bd.script("child.sh", `while IFS= read -r job; do printf '{"done":true}\n' >&3; done`)
	var ids []string
	for range 6 {
		ids = append(ids, bd.enqueue("p", `{}`, kyu.EnqueueOptions{}))
	}
	r := bd.start(daemon.Config{Concurrency: 1, Prefetch: 3, MaxJobs: 2, Handlers: map[string]daemon.HandlerConfig{
		"p": {Command: []string{child}, Prefork: 1},
	}})
	r.wait(t)
	completed, handedBack := 0, 0
	for _, id := range ids {
		j, err := bd.c.Get(t.Context(), id)
		switch {
		case err != nil:
			t.Fatal(err)
		case j.State == kyu.StateCompleted:
			completed++
		case j.State == kyu.StatePending && j.Attempt == 0:
			handedBack++
		}
	}
	if completed != 2 || handedBack != 4 {
		t.Errorf("%d completed, %d pending unspent; want 2 (MaxJobs) and 4", completed, handedBack)
	}
}
