//go:build unix

package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/kyuhq/kyu"
)

// Exit codes with a meaning of their own (from sysexits.h).
const (
	// ExitTempFail (EX_TEMPFAIL) asks for a retry with backoff, whatever
	// the handler's retry policy.
	ExitTempFail = 75
	// ExitDataErr (EX_DATAERR) fails the job for good.
	ExitDataErr = 65
)

// controlFD is the child's file descriptor of control lines.
const controlFD = 3

// Bounds of a child's output lines as job log lines: a longer line is
// split, and at most maxLogLine bytes of each piece are kept.
const (
	outputReadSize = 4096
	maxLogLine     = 8000
)

// readersWait bounds how long, once a child's process group is gone, the
// runner waits for its output and control pipes to reach EOF: a process
// that left the group (setsid) may still hold them.
const readersWait = time.Second

// execRunner runs the jobs of one type, one child process per job.
type execRunner struct {
	jobType   string
	cfg       HandlerConfig
	path      string   // the program, resolved once
	lookErr   error    // why path could not be resolved
	argv      []string // argv, argv[0] as configured
	env       []string // the daemon's environment plus cfg.Env
	killGrace time.Duration
	guard     Guard
	log       *slog.Logger
	level     slog.Level
}

// newExecRunner prepares a handler; a program not found is reported by
// each job's attempt, not here, so that a daemon serving many types stays
// up when one program is missing.
func newExecRunner(jobType string, h HandlerConfig, c Config) *execRunner {
	r := &execRunner{
		jobType: jobType, cfg: h, argv: h.argv(),
		killGrace: c.KillGrace, guard: c.Guard, log: c.Logger, level: c.JobLogLevel,
	}
	r.path = r.argv[0]
	if !strings.Contains(r.path, "/") {
		r.path, r.lookErr = exec.LookPath(r.path)
	}
	r.env = baseEnv(os.Environ(), h.Env)
	if c.Guard != nil {
		if kv := c.Guard.Env(); kv != "" {
			r.env = append(r.env, kv)
		}
	}
	return r
}

// jobEnvKeys are the variables the runners set for a child.
var jobEnvKeys = []string{"KYU_JOB_ID", "KYU_JOB_TYPE", "KYU_QUEUE", "KYU_ATTEMPT",
	"KYU_MAX_ATTEMPTS", "KYU_CONTROL_FD", "KYU_PREFORK", guardianMarkEnv}

// baseEnv is a child's environment before its job's variables: the
// daemon's, without the variables that extra or the runners set, then
// extra, sorted; each name is there once.
func baseEnv(daemonEnv []string, extra map[string]string) []string {
	env := make([]string, 0, len(daemonEnv)+len(extra)+len(jobEnvKeys))
	for _, kv := range daemonEnv {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := extra[k]; set || slices.Contains(jobEnvKeys, k) {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// startProcess starts the handler's program in a process group of its
// own, with stdin, stdout and stderr, and fd 3 (ctl). The process is
// started directly (not through exec.Cmd): every file is an *os.File and
// the environment is built once per runner, so nothing more is needed.
func (r *execRunner) startProcess(env []string, stdin, out, ctl *os.File) (*os.Process, error) {
	return os.StartProcess(r.path, r.argv, &os.ProcAttr{
		Dir: r.cfg.Dir, Env: env, Files: []*os.File{stdin, out, out, ctl}, Sys: childSysProcAttr(),
	})
}

// stopSignals are how a generation interrupts its running children:
// interrupt closes for SIGTERM (then SIGKILL after the grace), kill for
// SIGKILL at once.
type stopSignals struct {
	interrupt, kill <-chan struct{}
}

// errInterrupted is the outcome of a child stopped for a shutdown: its
// job is handed back unfinished.
var errInterrupted = errors.New("daemon: child interrupted by a shutdown")

// run runs job in a child and returns its outcome as a handler's error,
// or errInterrupted when stop interrupted it. It returns only once the
// child's process group is gone.
func (r *execRunner) run(ctx context.Context, job *kyu.Job, stop stopSignals) error {
	if r.lookErr != nil {
		return r.fail(fmt.Errorf("handler %q: %w", r.argv[0], r.lookErr))
	}
	if r.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
	}
	if ctx.Err() != nil {
		// Handed back or cancelled before it started.
		return context.Cause(ctx)
	}
	input, err := encodeJob(job)
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	c, err := r.start(job, input)
	if err != nil {
		return r.fail(err)
	}
	defer c.closeParentEnds()

	readers := c.readOutputs(ctx, job, r.log)

	var interrupted bool
	var why string
	select {
	case <-c.exited:
	case <-ctx.Done():
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, kyu.ErrLeaseLost):
			why = "lease lost"
			c.terminate(0, nil)
		case errors.Is(cause, kyu.ErrCancelled):
			why = "cancelled"
			c.terminate(r.killGrace, stop.kill)
		default:
			why = "timed out"
			c.terminate(r.killGrace, stop.kill)
		}
	case <-stop.interrupt:
		interrupted = true
		c.terminate(r.killGrace, stop.kill)
	case <-stop.kill:
		interrupted = true
		c.terminate(0, nil)
	}
	<-c.exited
	// The attempt counts only once no process of the group is left, so
	// that a retry never runs beside one.
	if !ensureGroupGone(c.pgid, r.killGrace, stop.kill) {
		r.log.Warn("daemon: process group outlived SIGKILL", "job_id", job.ID, "pgid", c.pgid)
	}
	if r.guard != nil {
		r.guard.Remove(c.pgid)
	}
	c.waitReaders(readers)
	if interrupted {
		return errInterrupted
	}
	return r.outcome(ctx, job, c, why)
}

// fail is an error in starting a child: the retry policy decides.
func (r *execRunner) fail(err error) error {
	if r.cfg.Retry.NoRetry {
		return kyu.Permanent(err)
	}
	return err
}

// outcome maps how the child ended to the handler's error.
func (r *execRunner) outcome(ctx context.Context, job *kyu.Job, c *child, why string) error {
	st := c.state
	ws, _ := st.Sys().(syscall.WaitStatus)
	tail := c.tail()
	withTail := func(msg string) error {
		if tail != "" {
			msg += ": " + tail
		}
		return errors.New(msg)
	}
	switch {
	case why != "":
		err := fmt.Errorf("%s after %s; %s", why, time.Since(c.started).Round(time.Millisecond), describeExit(ws))
		if cause := context.Cause(ctx); errors.Is(cause, kyu.ErrCancelled) || errors.Is(cause, kyu.ErrLeaseLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		return r.fail(err)
	case ws.Exited() && ws.ExitStatus() == 0:
		if c.result != nil {
			if err := job.SetResult(c.result); err != nil {
				return err
			}
		}
		return nil
	case ws.Exited() && ws.ExitStatus() == ExitTempFail:
		return withTail("exit status 75 (temporary failure, retry)")
	case ws.Exited() && ws.ExitStatus() == ExitDataErr:
		return kyu.Permanent(withTail("exit status 65 (data error, no retry)"))
	default:
		return r.fail(withTail(describeExit(ws)))
	}
}

// describeExit says how a process ended: "exit status N" or "killed by
// signal NAME".
func describeExit(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by signal " + signalName(ws.Signal())
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// signalName is "SIGKILL" for syscall.SIGKILL, and so on.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return fmt.Sprintf("%d (%s)", int(s), s)
}

// child is one running child process.
type child struct {
	proc    *os.Process
	pgid    int
	started time.Time
	exited  chan struct{} // closed once the process is reaped
	state   *os.ProcessState

	out, ctl *os.File // the parent's read ends

	mu      sync.Mutex
	result  []byte
	lastOut string
}

// start starts the child with its pipes and writes the job to its stdin.
func (r *execRunner) start(job *kyu.Job, input []byte) (*child, error) {
	// The child's ends (stdin's read end, the output's and control's
	// write ends) are plain blocking files, like stdin's write end, which
	// is written once; only the two ends the daemon reads go to Go's
	// poller, so that closing them ends a read in progress.
	stdinR, stdinW, err := pipe(false)
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe(true)
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	ctlR, ctlW, err := pipe(true)
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	env := append(r.env[:len(r.env):len(r.env)],
		"KYU_JOB_ID="+job.ID,
		"KYU_JOB_TYPE="+job.Type,
		"KYU_QUEUE="+job.Queue,
		"KYU_ATTEMPT="+strconv.Itoa(job.Attempt),
		"KYU_MAX_ATTEMPTS="+strconv.Itoa(job.MaxAttempts),
		"KYU_CONTROL_FD="+strconv.Itoa(controlFD),
	)
	proc, err := r.startProcess(env, stdinR, outW, ctlW)
	// The child holds its own ends now (or failed to start).
	stdinR.Close()
	outW.Close()
	ctlW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		ctlR.Close()
		return nil, fmt.Errorf("start %s: %w", r.describeProgram(), err)
	}
	c := &child{proc: proc, pgid: proc.Pid, started: time.Now(), exited: make(chan struct{}), out: outR, ctl: ctlR}
	if r.guard != nil {
		r.guard.Add(c.pgid)
	}
	go func() {
		c.state, _ = proc.Wait()
		close(c.exited)
	}()
	// A pipe holds 64 KiB: a job that fits is written at once, a bigger
	// one as the child reads it. A child that exits without reading ends
	// the write with EPIPE, which is no concern of the job's.
	if len(input) < 32<<10 {
		_, _ = stdinW.Write(input)
		stdinW.Close()
	} else {
		go func() {
			_, _ = stdinW.Write(input)
			stdinW.Close()
		}()
	}
	return c, nil
}

// describeProgram names the program in an error: its path, and its
// directory when it is relative.
func (r *execRunner) describeProgram() string {
	if r.cfg.Dir != "" && !filepath.IsAbs(r.path) {
		return fmt.Sprintf("%s (in %s)", r.path, r.cfg.Dir)
	}
	return r.path
}

// terminate sends SIGTERM to the child's group, then SIGKILL after grace
// or once kill is closed; a grace of 0 sends SIGKILL at once. It returns
// once the child itself has exited.
func (c *child) terminate(grace time.Duration, kill <-chan struct{}) {
	if grace <= 0 {
		_ = signalGroup(c.pgid, syscall.SIGKILL)
		<-c.exited
		return
	}
	_ = signalGroup(c.pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
		return
	case <-t.C:
	case <-kill:
	}
	_ = signalGroup(c.pgid, syscall.SIGKILL)
	<-c.exited
}

// readOutputs reads the child's output into the job's log and its
// control lines, each in a goroutine; the returned channel is closed
// once both have reached EOF.
func (c *child) readOutputs(ctx context.Context, job *kyu.Job, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		readLines(c.out, func(line string) {
			c.mu.Lock()
			c.lastOut = line
			c.mu.Unlock()
			_ = kyu.Log(ctx, line)
		})
	})
	wg.Go(func() {
		readControlLines(c.ctl, func(line string) {
			c.control(ctx, job, line, log)
		})
	})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// control acts on one control line.
func (c *child) control(ctx context.Context, job *kyu.Job, line string, log *slog.Logger) {
	m, err := parseControl([]byte(line))
	if err != nil {
		log.Warn("daemon: ignored a control line that is not a message", "job_id", job.ID, "type", job.Type,
			"line", clip(line, 200), "error", err)
		_ = kyu.Log(ctx, "kyu: ignored control line on fd 3 ("+err.Error()+"): "+clip(line, 200))
		return
	}
	if m.Progress != nil {
		if err := kyu.Progress(ctx, *m.Progress, m.Message); err != nil {
			log.Warn("daemon: progress refused", "job_id", job.ID, "error", err)
		}
	}
	if m.Log != nil {
		_ = kyu.Log(ctx, clip(strings.ToValidUTF8(*m.Log, "\uFFFD"), maxLogLine))
	}
	if m.Result != nil {
		c.mu.Lock()
		c.result = m.Result
		c.mu.Unlock()
	}
}

// waitReaders waits for the readers to reach EOF, up to readersWait, then
// closes the pipes so that they end.
func (c *child) waitReaders(done <-chan struct{}) {
	t := time.NewTimer(readersWait)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	c.closeParentEnds()
	<-done
}

// closeParentEnds closes the parent's read ends (again is harmless).
func (c *child) closeParentEnds() {
	c.out.Close()
	c.ctl.Close()
}

// tail is the child's last output line, shortened, for an error message.
func (c *child) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clip(c.lastOut, 200)
}

// readLines calls fn with each line of r, without its newline, as valid
// UTF-8 of at most maxLogLine bytes; a longer line comes in pieces.
func readLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, outputReadSize)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			s := strings.TrimRight(string(b), "\r\n")
			if s != "" || err == nil {
				fn(clip(strings.ToValidUTF8(s, "\uFFFD"), maxLogLine))
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// readControlLines calls fn with each line of r, without its newline; a
// line over maxControlLine is passed on cut, so that it is refused.
func readControlLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, outputReadSize)
	var long []byte
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxControlLine {
				long = append(long, b...)
			}
			continue
		}
		if len(long) > 0 {
			b = append(long, b...)
			long = long[:0]
		}
		if len(b) > maxControlLine {
			b = b[:maxControlLine]
		}
		if s := strings.TrimRight(string(b), "\r\n"); s != "" {
			fn(s)
		}
		if err != nil {
			return
		}
	}
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
