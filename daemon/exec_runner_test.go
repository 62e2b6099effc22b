//go:build unix

package daemon_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/daemon"
)

// TestExecProtocol checks what a child gets (stdin, environment) and what
// it reports (progress, log, result, output lines), a garbage control
// line being logged and ignored.
func TestExecProtocol(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("h.sh", `
read -r job
echo "stdin: $job"
echo "env: $KYU_JOB_ID $KYU_JOB_TYPE $KYU_QUEUE $KYU_ATTEMPT $KYU_MAX_ATTEMPTS $KYU_CONTROL_FD $EXTRA $HOME"
echo '{"progress":42,"message":"half way"}' >&3
echo 'this is not json' >&3
echo '{"log":"from fd 3"}' >&3
echo '{"heartbeat":true}' >&3
echo '{"result": {"ok": true,  "n": [1, 2]}}' >&"$KYU_CONTROL_FD"
echo "on stderr" >&2
`)
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{
		"proto": {Command: []string{h}, Env: map[string]string{"EXTRA": "extra-value", "HOME": "/handler-home"}},
	}})
	id := bd.enqueue("proto", `{"to":"a@b"}`, kyu.EnqueueOptions{MaxAttempts: 3, Metadata: map[string]string{"k": "v"}})
	j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })

	if string(j.Result) != `{"ok":true,"n":[1,2]}` {
		t.Errorf("result %s; want the compacted JSON of the result line", j.Result)
	}
	if j.Progress == nil || j.Progress.Percent != 42 || j.Progress.Message != "half way" {
		t.Errorf("progress %+v; want 42, half way", j.Progress)
	}
	var lines []string
	for _, l := range j.Logs {
		lines = append(lines, l.Line)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"env: " + id + " proto default 1 3 3 extra-value /handler-home",
		"from fd 3",
		"on stderr",
		"kyu: ignored control line on fd 3",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("logs lack %q:\n%s", want, all)
		}
	}
	var in map[string]any
	var stdin string
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, "stdin: "); ok {
			stdin = s
		}
	}
	if err := json.Unmarshal([]byte(stdin), &in); err != nil {
		t.Fatalf("stdin line %q: %v; want the job's JSON", stdin, err)
	}
	if in["id"] != id || in["type"] != "proto" || in["queue"] != "default" || in["attempt"] != 1.0 ||
		in["max_attempts"] != 3.0 || in["payload"].(map[string]any)["to"] != "a@b" ||
		in["metadata"].(map[string]any)["k"] != "v" || in["created_at"] == nil {
		t.Errorf("stdin %s lacks a field", stdin)
	}
	if _, ok := in["deadline"]; !ok {
		t.Errorf("stdin %s has no deadline key", stdin)
	}
	if !strings.Contains(bd.log.String(), "ignored a control line") {
		t.Errorf("daemon did not log the garbage control line")
	}
}

// TestPayloadNotJSON checks that a payload that is not JSON goes base64.
func TestPayloadNotJSON(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("h.sh", `read -r job; echo "{\"result\": $job}" >&3`)
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{"raw": {Command: []string{h}}}})
	id := bd.enqueue("raw", "\x00\xffbin", kyu.EnqueueOptions{})
	j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	var in map[string]any
	if err := json.Unmarshal(j.Result, &in); err != nil {
		t.Fatal(err)
	}
	if _, has := in["payload"]; has || in["payload_b64"] != "AP9iaW4=" {
		t.Errorf("job %s; want payload_b64 AP9iaW4= and no payload", j.Result)
	}
}

// TestExitCodes checks each exit code's meaning, and a death by signal.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("exit.sh", `read -r job; echo "last words"; [ "$CODE" = kill ] && kill -9 $$; exit "$CODE"`)
	handler := func(code string, noRetry bool) daemon.HandlerConfig {
		return daemon.HandlerConfig{Command: []string{h}, Env: map[string]string{"CODE": code},
			Retry: daemon.RetryPolicy{NoRetry: noRetry, Backoff: daemon.BackoffFixed, BackoffBase: time.Hour}}
	}
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{
		"ok": handler("0", false), "temp": handler("75", true), "data": handler("65", false),
		"other": handler("3", false), "other-noretry": handler("3", true), "signal": handler("kill", false),
	}})
	for _, tc := range []struct {
		jobType string
		state   kyu.State
		err     string
	}{
		{"ok", kyu.StateCompleted, ""},
		{"temp", kyu.StateRetry, "exit status 75 (temporary failure, retry): last words"},
		{"data", kyu.StateFailed, "exit status 65 (data error, no retry): last words"},
		{"other", kyu.StateRetry, "exit status 3: last words"},
		{"other-noretry", kyu.StateFailed, "exit status 3: last words"},
		{"signal", kyu.StateRetry, "killed by signal SIGKILL: last words"},
	} {
		t.Run(tc.jobType, func(t *testing.T) {
			id := bd.enqueue(tc.jobType, `{}`, kyu.EnqueueOptions{MaxAttempts: 5})
			j := bd.waitJob(id, string(tc.state), func(j *kyu.Job) bool { return j.State == tc.state })
			if got := lastError(j); got != tc.err {
				t.Errorf("error %q; want %q", got, tc.err)
			}
		})
	}
}

// TestHungChildKilledAfterGrace checks that a child ignoring SIGTERM past
// its timeout is killed with its whole group after the grace, that the
// attempt is recorded only once the group is gone, and that the job is
// retried.
func TestHungChildKilledAfterGrace(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("hung.sh", `
trap '' TERM
[ "$KYU_ATTEMPT" -ge 2 ] && exit 0
sleep 60 &
echo $! > "$DIR/grandchild"
echo $$ > "$DIR/child"
wait
`)
	bd.start(daemon.Config{KillGrace: 300 * time.Millisecond, Handlers: map[string]daemon.HandlerConfig{
		"hung": {Command: []string{h}, Timeout: 300 * time.Millisecond, Env: map[string]string{"DIR": bd.dir},
			Retry: daemon.RetryPolicy{Backoff: daemon.BackoffFixed}},
	}})
	start := time.Now()
	id := bd.enqueue("hung", `{}`, kyu.EnqueueOptions{MaxAttempts: 3})
	child, grandchild := readPID(t, filepath.Join(bd.dir, "child")), readPID(t, filepath.Join(bd.dir, "grandchild"))
	j := bd.waitJob(id, "first attempt failed", func(j *kyu.Job) bool { return len(j.Errors) > 0 })
	if alive(child) || alive(grandchild) {
		t.Errorf("attempt recorded while child %d alive %v, grandchild %d alive %v", child, alive(child), grandchild, alive(grandchild))
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("attempt ended after %v; want the timeout plus the grace", took)
	}
	if msg := lastError(j); !strings.Contains(msg, "timed out") || !strings.Contains(msg, "SIGKILL") {
		t.Errorf("error %q; want a timeout and SIGKILL", msg)
	}
	j = bd.waitJob(id, "completed on retry", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	if j.Attempt != 2 {
		t.Errorf("completed at attempt %d; want 2", j.Attempt)
	}
}

// TestCancelRunningChild checks that a cancel from the API stops the
// child's group (here on SIGTERM, within the grace) and ends the job
// cancelled.
func TestCancelRunningChild(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("long.sh", `
sleep 60 &
echo $! > "$DIR/grandchild"
echo $$ > "$DIR/child"
wait
`)
	bd.start(daemon.Config{KillGrace: 5500 * time.Millisecond, Lease: 6 * time.Second, Handlers: map[string]daemon.HandlerConfig{
		"long": {Command: []string{h}, Env: map[string]string{"DIR": bd.dir}},
	}})
	id := bd.enqueue("long", `{}`, kyu.EnqueueOptions{})
	child, grandchild := readPID(t, filepath.Join(bd.dir, "child")), readPID(t, filepath.Join(bd.dir, "grandchild"))
	start := time.Now()
	if _, err := bd.c.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	j := bd.waitJob(id, "cancelled", func(j *kyu.Job) bool { return j.State == kyu.StateCancelled })
	if alive(child) || alive(grandchild) {
		t.Errorf("job cancelled while its processes live")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancel took %v; SIGTERM should have ended the group within the 5.5s grace", took)
	}
	if msg := lastError(j); !strings.Contains(msg, "cancelled") {
		t.Errorf("error %q; want cancelled", msg)
	}
}

// TestHandlerMissing checks that a handler program that does not exist
// fails its jobs with that reason while the daemon goes on with others.
func TestHandlerMissing(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	missing := filepath.Join(bd.dir, "no-such-handler")
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{
		"missing":    {Command: []string{missing}},
		"missing-sh": {Shell: missing + " --flag"},
		"fine":       {Command: []string{"/bin/true"}},
	}})
	a := bd.enqueue("missing", `{}`, kyu.EnqueueOptions{MaxAttempts: 1})
	b := bd.enqueue("missing-sh", `{}`, kyu.EnqueueOptions{MaxAttempts: 1})
	ja := bd.waitJob(a, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
	if msg := lastError(ja); !strings.Contains(msg, missing) || !strings.Contains(msg, "no such file or directory") {
		t.Errorf("error %q; want the path and no such file", msg)
	}
	jb := bd.waitJob(b, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
	if msg := lastError(jb); !strings.Contains(msg, "exit status 127") || !strings.Contains(msg, "no-such-handler") {
		t.Errorf("error %q; want the shell's exit 127 and the path", msg)
	}
	c := bd.enqueue("fine", `{}`, kyu.EnqueueOptions{})
	bd.waitJob(c, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
}

// TestLargeResult checks that a result line longer than the read buffer
// arrives whole.
func TestLargeResult(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("big.sh", `printf '{"result":"%s"}\n' "$(head -c 20000 /dev/zero | tr '\0' x)" >&3`)
	bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{"big": {Command: []string{h}}}})
	id := bd.enqueue("big", `{}`, kyu.EnqueueOptions{})
	j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	if len(j.Result) != 20002 {
		t.Errorf("result of %d bytes; want 20002", len(j.Result))
	}
}
