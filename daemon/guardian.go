//go:build unix

package daemon

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// GuardianEnv is the environment variable that makes a process started by
// StartGuardian serve as a guardian (see ServeGuardianIfAsked); its value
// is the guardian's mark.
const GuardianEnv = "KYU_INTERNAL_GUARDIAN"

// guardianMarkEnv is the variable every child gets (Guardian.Env): the
// guardian's mark, which the processes a child starts inherit.
const guardianMarkEnv = "KYU_DAEMON_MARK"

// Guardian is a Guard in a process of its own. The daemon writes "+PGID"
// and "-PGID" lines to the guardian's stdin; when the daemon dies, even
// by SIGKILL, the kernel closes that pipe, and the guardian sends SIGKILL
// to every group still listed, then to every process that carries its
// mark in its environment (KYU_DAEMON_MARK, given to each child, which its
// own children inherit): a child may start processes before the daemon
// has listed its group. A child's own death signal (PR_SET_PDEATHSIG)
// reaches only the child, not the processes it started.
type Guardian struct {
	mu   sync.Mutex
	w    *os.File
	cmd  *exec.Cmd
	log  *slog.Logger
	mark string
	dead bool
}

// StartGuardian starts the guardian: the program at path (usually this
// one, os.Executable) run with GuardianEnv set, whose main calls
// ServeGuardianIfAsked first.
func StartGuardian(path string, log *slog.Logger) (*Guardian, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guardian pipe: %w", err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), GuardianEnv+"="+mark)
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	// Its own process group: a signal to the daemon's group (a
	// terminal's ^C, a supervisor's TERM) leaves it to the daemon's exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start guardian %s: %w", path, err)
	}
	r.Close()
	g := &Guardian{w: w, cmd: cmd, log: log, mark: mark}
	go func() { _ = cmd.Wait() }()
	return g, nil
}

// Env is the mark every child carries: "KYU_DAEMON_MARK=…".
func (g *Guardian) Env() string { return guardianMarkEnv + "=" + g.mark }

// Add lists a process group.
func (g *Guardian) Add(pgid int) { g.send('+', pgid) }

// Remove unlists a process group.
func (g *Guardian) Remove(pgid int) { g.send('-', pgid) }

func (g *Guardian) send(op byte, pgid int) {
	var buf [24]byte
	b := strconv.AppendInt(append(buf[:0], op), int64(pgid), 10)
	b = append(b, '\n')
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return
	}
	if _, err := g.w.Write(b); err != nil {
		g.dead = true
		g.log.Error("daemon: guardian gone; children will not be killed if the daemon dies", "error", err)
	}
}

// Close ends the guardian, which kills the groups still listed (none,
// after a clean stop) and exits.
func (g *Guardian) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dead = true
	return g.w.Close()
}

// ServeGuardianIfAsked, called first thing in main, turns the process
// into a guardian when StartGuardian started it: it serves until its
// stdin ends, kills the groups listed, and exits. Otherwise it returns at
// once.
func ServeGuardianIfAsked() {
	mark := os.Getenv(GuardianEnv)
	if mark == "" {
		return
	}
	// The daemon decides when its children end: signals meant for it
	// (to its group, from a terminal or a supervisor) must not end the
	// guardian first.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	serveGuardian(os.Stdin, mark)
	os.Exit(0)
}

// serveGuardian reads "+PGID" and "-PGID" lines from r until EOF, then
// sends SIGKILL to every group listed, and to the processes (and their
// groups) whose environment holds mark.
func serveGuardian(r io.Reader, mark string) {
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(string(line[1:]))
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			fmt.Fprintf(os.Stderr, "kyu guardian: kill process group %d: %v\n", pgid, err)
		}
	}
	killMarked(guardianMarkEnv + "=" + mark)
}
