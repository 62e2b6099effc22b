//go:build unix

package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kyuhq/kyu"
)

// preforkRunner runs the jobs of one type in Prefork long-lived
// children, one job at a time each: the job as a JSON line on the
// child's stdin, the child's answer on fd 3 ending with {"done":true} or
// {"error":…}. A child is started when a job needs one, replaced after
// about MaxJobsPerChild jobs, and when it dies; a child that a timeout,
// a cancel or a shutdown stops is killed with its group and replaced.
type preforkRunner struct {
	exec *execRunner // the program, environment and logger

	idle  chan *pchild  // children waiting for a job
	slots chan struct{} // a token per child that may be started

	mu     sync.Mutex
	all    map[*pchild]struct{}
	closed bool
}

// pchild is one prefork child.
type pchild struct {
	*child
	stdin *os.File
	msgs  chan string // control lines; closed at EOF
	limit int         // jobs before the child is replaced; 0: none
	jobs  int

	curMu  sync.Mutex
	curCtx context.Context // the running job's handler context, for its output

	// outMu is held while output is read from the pipe and handed on as
	// lines (or kept as a partial line), so that flushOutput, holding it,
	// sees either output still in the pipe or all of it handed on.
	outMu sync.Mutex
}

func newPreforkRunner(jobType string, h HandlerConfig, c Config) *preforkRunner {
	r := &preforkRunner{
		exec:  newExecRunner(jobType, h, c),
		idle:  make(chan *pchild, h.Prefork),
		slots: make(chan struct{}, h.Prefork),
		all:   map[*pchild]struct{}{},
	}
	for range h.Prefork {
		r.slots <- struct{}{}
	}
	r.exec.env = append(r.exec.env, "KYU_CONTROL_FD=3", "KYU_PREFORK=1")
	return r
}

// run runs job in a child, starting one when none is idle and fewer than
// Prefork run.
func (r *preforkRunner) run(ctx context.Context, job *kyu.Job, stop stopSignals) error {
	e := r.exec
	if e.lookErr != nil {
		return e.fail(fmt.Errorf("handler %q: %w", e.argv[0], e.lookErr))
	}
	if e.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.Timeout)
		defer cancel()
	}
	input, err := encodeJob(job)
	if err != nil {
		return fmt.Errorf("encode job: %w", err)
	}
	c, err := r.acquire(ctx, stop)
	if err != nil {
		return err
	}
	c.curMu.Lock()
	c.curCtx = ctx
	c.curMu.Unlock()
	defer func() {
		c.curMu.Lock()
		c.curCtx = nil
		c.curMu.Unlock()
	}()
	if _, err := c.stdin.Write(input); err != nil {
		r.discard(c, 0, nil)
		return e.fail(fmt.Errorf("prefork child %d did not take the job: %w", c.pgid, err))
	}
	var result []byte
	for {
		select {
		case line, ok := <-c.msgs:
			if !ok {
				<-c.exited
				r.discard(c, e.killGrace, stop.kill)
				return e.fail(fmt.Errorf("prefork child died mid-job: %s", describeExit(c.waitStatus())))
			}
			m, err := parseControl([]byte(line))
			if err != nil {
				e.log.Warn("daemon: ignored a control line that is not a message", "job_id", job.ID, "type", job.Type,
					"line", clip(line, 200), "error", err)
				_ = kyu.Log(ctx, "kyu: ignored control line on fd 3 ("+err.Error()+"): "+clip(line, 200))
				continue
			}
			if m.Progress != nil {
				if err := kyu.Progress(ctx, *m.Progress, m.Message); err != nil {
					e.log.Warn("daemon: progress refused", "job_id", job.ID, "error", err)
				}
			}
			if m.Log != nil {
				_ = kyu.Log(ctx, clip(strings.ToValidUTF8(*m.Log, "\uFFFD"), maxLogLine))
			}
			if m.Result != nil {
				result = m.Result
			}
			if m.Error != nil || m.Done {
				c.flushOutput()
			}
			switch {
			case m.Error != nil:
				r.release(c)
				err := errors.New(clip(*m.Error, 2000))
				if !m.Retry {
					return kyu.Permanent(err)
				}
				return err
			case m.Done:
				r.release(c)
				if result != nil {
					return job.SetResult(result)
				}
				return nil
			}
		case <-ctx.Done():
			cause := context.Cause(ctx)
			switch {
			case errors.Is(cause, kyu.ErrLeaseLost):
				r.discard(c, 0, nil)
				return fmt.Errorf("lease lost; prefork child killed (%w)", cause)
			case errors.Is(cause, kyu.ErrCancelled):
				r.discard(c, e.killGrace, stop.kill)
				return fmt.Errorf("cancelled; prefork child stopped (%w)", cause)
			default:
				r.discard(c, e.killGrace, stop.kill)
				return e.fail(fmt.Errorf("timed out after %s; prefork child stopped", time.Since(c.started).Round(time.Millisecond)))
			}
		case <-stop.interrupt:
			r.discard(c, e.killGrace, stop.kill)
			return errInterrupted
		case <-stop.kill:
			r.discard(c, 0, nil)
			return errInterrupted
		}
	}
}

// acquire takes an idle child that is still alive, or starts one.
func (r *preforkRunner) acquire(ctx context.Context, stop stopSignals) (*pchild, error) {
	for {
		select {
		case c := <-r.idle:
			select {
			case <-c.exited:
				r.discard(c, 0, nil) // died while idle
				continue
			default:
				return c, nil
			}
		case <-r.slots:
			c, err := r.start()
			if err != nil {
				r.slots <- struct{}{}
				return nil, r.exec.fail(err)
			}
			return c, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-stop.interrupt:
			return nil, errInterrupted
		case <-stop.kill:
			return nil, errInterrupted
		}
	}
}

// start starts a child, with readers for its output and control lines.
func (r *preforkRunner) start() (*pchild, error) {
	e := r.exec
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
	proc, err := e.startProcess(e.env, stdinR, outW, ctlW)
	stdinR.Close()
	outW.Close()
	ctlW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		ctlR.Close()
		return nil, fmt.Errorf("start %s: %w", e.describeProgram(), err)
	}
	c := &pchild{
		child: &child{proc: proc, pgid: proc.Pid, started: time.Now(), exited: make(chan struct{}), out: outR, ctl: ctlR},
		stdin: stdinW,
		msgs:  make(chan string, 16),
	}
	if n := e.cfg.MaxJobsPerChild; n > 0 {
		c.limit = n - rand.IntN(n/10+1)
	}
	if e.guard != nil {
		e.guard.Add(c.pgid)
	}
	r.mu.Lock()
	r.all[c] = struct{}{}
	r.mu.Unlock()
	go func() {
		c.state, _ = proc.Wait()
		close(c.exited)
	}()
	go c.readOutput(func(line string) {
		c.curMu.Lock()
		ctx := c.curCtx
		c.curMu.Unlock()
		if ctx == nil || kyu.Log(ctx, line) != nil {
			e.log.Debug("daemon: prefork child output between jobs", "type", e.jobType, "pid", c.pgid, "line", clip(line, 200))
		}
	})
	go func() {
		readControlLines(ctlR, func(line string) { c.msgs <- line })
		close(c.msgs)
	}()
	e.log.Debug("daemon: prefork child started", "type", e.jobType, "pid", c.pgid)
	return c, nil
}

// release gives a child back after a job, or retires it past its limit.
func (r *preforkRunner) release(c *pchild) {
	c.jobs++
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed || (c.limit > 0 && c.jobs >= c.limit) {
		r.exec.log.Debug("daemon: prefork child retired", "type", r.exec.jobType, "pid", c.pgid, "jobs", c.jobs)
		go r.retire(c)
		return
	}
	r.idle <- c
}

// retire ends a child by closing its stdin, and waits for its group to
// be gone (SIGTERM, then SIGKILL, if it does not exit within the grace).
func (r *preforkRunner) retire(c *pchild) {
	c.stdin.Close()
	t := time.NewTimer(r.exec.killGrace)
	select {
	case <-c.exited:
		t.Stop()
	case <-t.C:
	}
	r.discard(c, r.exec.killGrace, nil)
}

// discard stops a child's group (SIGTERM, SIGKILL after grace or when
// kill closes; at once with grace 0) and forgets it, freeing its slot.
func (r *preforkRunner) discard(c *pchild, grace time.Duration, kill <-chan struct{}) {
	select {
	case <-c.exited:
	default:
		c.terminate(grace, kill)
	}
	if !ensureGroupGone(c.pgid, grace, kill) {
		r.exec.log.Warn("daemon: process group outlived SIGKILL", "pgid", c.pgid)
	}
	if r.exec.guard != nil {
		r.exec.guard.Remove(c.pgid)
	}
	c.stdin.Close()
	c.closeParentEnds()
	r.mu.Lock()
	delete(r.all, c)
	r.mu.Unlock()
	r.slots <- struct{}{}
}

// close retires every idle child and waits for them; called once the
// generation has stopped, when no job runs.
func (r *preforkRunner) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for {
		select {
		case c := <-r.idle:
			wg.Go(func() { r.retire(c) })
			continue
		default:
		}
		break
	}
	wg.Wait()
}

// readOutput calls fn with each line of the child's output, as
// readLines does. Each read from the pipe and the handing on of what it
// read happen under outMu (see flushOutput), in the poller's callback:
// a read that finds the pipe empty waits for it outside the lock.
func (c *pchild) readOutput(fn func(string)) {
	buf := make([]byte, outputReadSize)
	var partial []byte
	emit := func(b []byte) {
		fn(clip(strings.ToValidUTF8(strings.TrimRight(string(b), "\r"), "\uFFFD"), maxLogLine))
	}
	handOn := func(rest []byte) {
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			if len(partial) > 0 {
				emit(append(partial, rest[:i]...))
				partial = partial[:0]
			} else {
				emit(rest[:i])
			}
			rest = rest[i+1:]
		}
		partial = append(partial, rest...)
		if len(partial) >= outputReadSize {
			emit(partial)
			partial = partial[:0]
		}
	}
	rc, err := c.out.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			c.outMu.Lock()
			defer c.outMu.Unlock()
			for {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				return false // wait until the pipe is readable
			}
			if n > 0 {
				handOn(buf[:n])
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			if len(partial) > 0 {
				emit(partial)
			}
			return
		}
	}
}

// flushOutput waits, up to outputFlushWait, until the output the child
// wrote before its answer has been read and handed to the job's log: a
// child writes its output, then its answer on another pipe, so the
// output is in its pipe (or being handed on) by the time the answer is
// read. Holding outMu, an empty pipe means all of it was handed on.
func (c *pchild) flushOutput() {
	deadline := time.Now().Add(outputFlushWait)
	for {
		c.outMu.Lock()
		empty := pipeEmpty(c.out)
		c.outMu.Unlock()
		if empty || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// outputFlushWait bounds flushOutput.
const outputFlushWait = 50 * time.Millisecond

// waitStatus is how the child ended (once exited).
func (c *child) waitStatus() syscall.WaitStatus {
	ws, _ := c.state.Sys().(syscall.WaitStatus)
	return ws
}
