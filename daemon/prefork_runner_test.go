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
