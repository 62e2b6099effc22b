//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// workerProc is kyu worker run as a process of its own (this test binary
// run as kyu, see TestMain).
type workerProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startWorkerProc starts kyu worker with args against the store at url.
func startWorkerProc(t *testing.T, url string, args ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"worker", "--backend", url}, args...)...)
	cmd.Env = append(os.Environ(), asKyuEnv+"=1")
	p := &workerProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("kyu worker output:\n%s", p.stderr.String())
		}
	})
	p.stderr.waitFor(t, "daemon: started")
	return p
}

func (p *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// exitCode waits for the process to end and returns its exit code.
func (p *workerProc) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("kyu worker still running after %v", within)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// apiEnqueue enqueues a job with the REST API, as curl would, and
// returns its id.
func apiEnqueue(t *testing.T, base, body string) string {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue %s: status %d, %v", body, resp.StatusCode, err)
	}
	return out.ID
}

// apiJob is GET /api/v1/jobs/{id}, decoded.
type apiJob struct {
	State    string          `json:"state"`
	Attempt  int             `json:"attempt"`
	Result   json.RawMessage `json:"result"`
	Progress *struct {
		Percent float64 `json:"percent"`
		Message string  `json:"message"`
	} `json:"progress"`
	Logs []struct {
		Line string `json:"line"`
	} `json:"logs"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

func getAPIJob(t *testing.T, base, id string) apiJob {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/jobs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var j apiJob
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("job %s: %v in %s", id, err, b)
	}
	return j
}

// getAPIWorkers lists the worker registry through GET /api/v1/workers.
func getAPIWorkers(t *testing.T, base string) []kyu.WorkerInfo {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Workers []kyu.WorkerInfo }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("workers: %v", err)
	}
	return list.Workers
}

// waitAPIJob polls the job until cond holds.
func waitAPIJob(t *testing.T, base, id, what string, cond func(apiJob) bool) apiJob {
	t.Helper()
	var j apiJob
	eventually(t, "job "+id+" "+what, func() bool {
		j = getAPIJob(t, base, id)
		return cond(j)
	})
	return j
}

func stateIs(s string) func(apiJob) bool { return func(j apiJob) bool { return j.State == s } }

// pidFile waits for a file holding a pid.
func pidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "pid in "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkerEndToEnd runs the README's path: kyu server, then kyu worker
// with handlers in sh, Python and Node (those on the machine), jobs
// enqueued over HTTP, their results, progress and logs read back.
func TestWorkerEndToEnd(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	examples, err := filepath.Abs("../../examples/worker")
	if err != nil {
		t.Fatal(err)
	}
	handlers := []string{"--handle", "sh.greet=" + filepath.Join(examples, "handler.sh")}
	want := map[string]string{"sh.greet": `"handler":"sh"`}
	if _, err := exec.LookPath("python3"); err == nil {
		handlers = append(handlers, "--handle", "py.greet=python3 "+filepath.Join(examples, "handler.py"))
		want["py.greet"] = `"greeting":"Hello, Ada!"`
	}
	if _, err := exec.LookPath("node"); err == nil {
		handlers = append(handlers, "--handle", "js.greet=node "+filepath.Join(examples, "handler.js"))
		want["js.greet"] = `"greeting":"Hello, Ada!"`
	}
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append([]string{"worker", "--backend", base, "--queues", "default,mail", "--concurrency", "4"}, handlers...), io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kyu worker: %v", err)
		}
		if t.Failed() {
			t.Logf("kyu worker log:\n%s", stderr.String())
		}
	}()
	for jobType, result := range want {
		id := apiEnqueue(t, base, `{"type":"`+jobType+`","queue":"mail","payload":{"name":"Ada"}}`)
		j := waitAPIJob(t, base, id, "completed", stateIs("completed"))
		if !strings.Contains(string(j.Result), result) {
			t.Errorf("%s: result %s; want %s", jobType, j.Result, result)
		}
		if j.Progress == nil || j.Progress.Percent != 50 {
			t.Errorf("%s: progress %+v; want 50", jobType, j.Progress)
		}
		if len(j.Logs) < 2 || !strings.Contains(j.Logs[0].Line+j.Logs[1].Line, "attempt 1 of 25") {
			t.Errorf("%s: logs %+v; want the handler's output", jobType, j.Logs)
		}
	}
	// Bad input: exit 65 fails the job at once.
	id := apiEnqueue(t, base, `{"type":"sh.greet"}`)
	j := waitAPIJob(t, base, id, "failed", stateIs("failed"))
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, "exit status 65") {
		t.Errorf("errors %+v; want one, exit status 65", j.Errors)
	}
	stderr.waitFor(t, "msg=\"job finished\"")
}

// TestWorkerKill9 checks that a worker killed with SIGKILL leaves no
// process of its children's groups (the child forks a grandchild), and
// that its job runs again once its lease expires.
func TestWorkerKill9(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	dir := t.TempDir()
	h := writeScript(t, dir, "h.sh", `
[ "$KYU_ATTEMPT" -ge 2 ] && exit 0
sleep 300 &
echo $! > "`+dir+`/grandchild"
echo $$ > "`+dir+`/child"
wait
`)
	w := startWorkerProc(t, base, "--handle", "t="+h, "--lease", "2s")
	id := apiEnqueue(t, base, `{"type":"t"}`)
	child, grandchild := pidFile(t, filepath.Join(dir, "child")), pidFile(t, filepath.Join(dir, "grandchild"))
	w.signal(t, syscall.SIGKILL)
	w.exitCode(t, opWait)
	eventually(t, "child and grandchild gone", func() bool { return !processAlive(child) && !processAlive(grandchild) })

	killed := time.Now()
	startWorkerProc(t, base, "--handle", "t="+h, "--lease", "2s")
	j := waitAPIJob(t, base, id, "completed on its second attempt", stateIs("completed"))
	if j.Attempt != 2 {
		t.Errorf("completed at attempt %d; want 2", j.Attempt)
	}
	if took := time.Since(killed); took > 15*time.Second {
		t.Errorf("job ran again %v after the kill; want about one lease (2s)", took)
	}
}

// TestWorkerSignals checks TTIN (state logged), TSTP (quiet) and CONT,
// HUP (reload; a bad config keeps the old one), then TERM with a hung
// job in flight: killed after the grace, handed back unspent, exit 0.
func TestWorkerSignals(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	dir := t.TempDir()
	gate := writeScript(t, dir, "gate.sh", `echo $$ > "`+dir+`/gate"; while [ ! -e "`+dir+`/open" ]; do sleep 0.01; done`)
	hung := writeScript(t, dir, "hung.sh", `trap '' TERM; echo $$ > "`+dir+`/hung"; sleep 300`)
	config := filepath.Join(dir, "worker.toml")
	writeConfig := func(version string) {
		t.Helper()
		src := fmt.Sprintf(`shutdown_timeout = "300ms"
kill_grace = "300ms"
[handlers.gate]
command = [%q]
[handlers.hung]
command = [%q]
[handlers.v]
shell = "echo '{\"result\":\"%s\"}' >&3"
`, gate, hung, version)
		if err := os.WriteFile(config, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("v1")
	w := startWorkerProc(t, base, "--config", config)

	// TTIN logs the running job.
	g := apiEnqueue(t, base, `{"type":"gate"}`)
	pidFile(t, filepath.Join(dir, "gate"))
	w.signal(t, syscall.SIGTTIN)
	w.stderr.waitFor(t, "job_id="+g)

	// TSTP: quiet; the running job finishes, a new one waits until CONT.
	w.signal(t, syscall.SIGTSTP)
	w.stderr.waitFor(t, "daemon: quiet")
	if err := os.WriteFile(filepath.Join(dir, "open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitAPIJob(t, base, g, "completed while quiet", stateIs("completed"))
	w.stderr.waitFor(t, "kyu: worker quiet")
	later := apiEnqueue(t, base, `{"type":"v"}`)
	time.Sleep(300 * time.Millisecond) // a claim would have come by now
	if j := getAPIJob(t, base, later); j.State != "pending" {
		t.Fatalf("job %s while quiet; want pending", j.State)
	}
	// The quiet daemon, its job done, is still up and still listed.
	if n := len(getAPIWorkers(t, base)); n != 1 || strings.Contains(w.stderr.String(), "kyu: worker stopped") {
		t.Fatalf("quiet daemon: %d workers listed, log:\n%s; want it listed, its worker not stopped", n, w.stderr.String())
	}
	w.signal(t, syscall.SIGCONT)
	if j := waitAPIJob(t, base, later, "completed after CONT", stateIs("completed")); string(j.Result) != `"v1"` {
		t.Errorf("result %s; want \"v1\"", j.Result)
	}

	// HUP with a broken config keeps the old one; with a good one, reloads.
	if err := os.WriteFile(config, []byte("[handlers.v]\nshell = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.signal(t, syscall.SIGHUP)
	w.stderr.waitFor(t, "reload: config refused")
	writeConfig("v2")
	w.signal(t, syscall.SIGHUP)
	w.stderr.waitFor(t, "daemon: reloaded")
	eventually(t, "a job run by the reloaded config", func() bool {
		id := apiEnqueue(t, base, `{"type":"v"}`)
		return string(waitAPIJob(t, base, id, "completed", stateIs("completed")).Result) == `"v2"`
	})

	// TERM with a hung job in flight.
	h := apiEnqueue(t, base, `{"type":"hung"}`)
	pid := pidFile(t, filepath.Join(dir, "hung"))
	waitAPIJob(t, base, h, "active", stateIs("active"))
	w.signal(t, syscall.SIGTERM)
	if code := w.exitCode(t, opWait); code != 0 {
		t.Errorf("exit code %d after TERM; want 0", code)
	}
	if processAlive(pid) {
		t.Error("hung child outlived the worker")
	}
	if j := getAPIJob(t, base, h); j.State != "pending" || j.Attempt != 0 {
		t.Errorf("hung job %s at attempt %d; want pending, its attempt unused", j.State, j.Attempt)
	}
}

// TestWorkerSecondTERM checks that a second TERM ends a graceful stop at
// once.
func TestWorkerSecondTERM(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	dir := t.TempDir()
	long := writeScript(t, dir, "long.sh", `echo $$ > "`+dir+`/long"; sleep 300`)
	w := startWorkerProc(t, base, "--handle", "long="+long, "--shutdown-timeout", "1h", "--kill-grace", "20s")
	id := apiEnqueue(t, base, `{"type":"long"}`)
	pid := pidFile(t, filepath.Join(dir, "long"))
	w.signal(t, syscall.SIGTERM)
	w.stderr.waitFor(t, "stopping gracefully")
	w.signal(t, syscall.SIGTERM)
	if code := w.exitCode(t, opWait); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	if processAlive(pid) {
		t.Error("child outlived the worker")
	}
	if j := getAPIJob(t, base, id); j.State != "pending" || j.Attempt != 0 {
		t.Errorf("job %s at attempt %d; want pending, its attempt unused", j.State, j.Attempt)
	}
}

// TestWorkerMaxJobs checks that --max-jobs makes the worker exit 0 after
// that many jobs, and --log-format json.
func TestWorkerMaxJobs(t *testing.T) {
	t.Parallel()
	base, stop := serveCLI(t)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	for range 5 {
		apiEnqueue(t, base, `{"type":"t"}`)
	}
	w := startWorkerProc(t, base, "--handle", "t=true", "--max-jobs", "2", "--concurrency", "1", "--log-format", "json")
	if code := w.exitCode(t, opWait); code != 0 {
		t.Errorf("exit code %d; want 0", code)
	}
	// One JSON object per line: two jobs finished, then the stop.
	finished, stopped := 0, false
	for line := range strings.Lines(w.stderr.String()) {
		var rec struct {
			Msg     string `json:"msg"`
			JobID   string `json:"job_id"`
			Outcome string `json:"outcome"`
			Jobs    int    `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		switch rec.Msg {
		case "job finished":
			if rec.JobID == "" || rec.Outcome != "completed" {
				t.Errorf("job line %s", line)
			}
			finished++
		case "daemon: stopped":
			stopped = rec.Jobs == 2
		}
	}
	if finished != 2 || !stopped {
		t.Errorf("%d jobs finished, stopped after 2: %v; want 2 and true:\n%s", finished, stopped, w.stderr.String())
	}
}
