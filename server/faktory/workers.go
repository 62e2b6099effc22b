package faktory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// workers keeps the registry entries of the Faktory workers connected
// here, by wid: a worker opens several connections under one wid, and its
// entry lives while any of them is open and it keeps beating.
type workers struct {
	b  backend.Registry
	mu sync.Mutex
	m  map[string]*workerEntry
}

// workerEntry is one wid's entry and what this listener knows of it.
type workerEntry struct {
	info    backend.WorkerInfo
	conns   int
	command backend.WorkerCommand
}

func newWorkers(b backend.Registry) *workers {
	return &workers{b: b, m: map[string]*workerEntry{}}
}

// hello records a connection of the worker h names and registers it.
func (ws *workers) hello(ctx context.Context, h helloArgs, now time.Time) error {
	ws.mu.Lock()
	e := ws.m[h.WID]
	if e == nil {
		e = &workerEntry{info: backend.WorkerInfo{
			ID: h.WID, Host: backend.TextOf(h.Hostname), PID: h.PID, StartedAt: now,
			Version: backend.TextOf(versionOf(h)), State: backend.WorkerRunning,
		}}
		ws.m[h.WID] = e
	}
	e.conns++
	ws.mu.Unlock()
	_, err := ws.register(ctx, h.WID, now)
	return err
}

// versionOf says what the worker is in the registry's version field:
// the protocol and the worker's labels.
func versionOf(h helloArgs) string {
	v := fmt.Sprintf("faktory v%d", h.Version)
	if len(h.Labels) > 0 {
		v += " (" + strings.Join(h.Labels, ", ") + ")"
	}
	return v
}

// register writes wid's entry to the registry and keeps the command the
// store returns.
func (ws *workers) register(ctx context.Context, wid string, now time.Time) (backend.WorkerCommand, error) {
	ws.mu.Lock()
	e := ws.m[wid]
	if e == nil {
		ws.mu.Unlock()
		return "", fmt.Errorf("unknown worker %s", wid)
	}
	info := *e.info.Clone()
	ws.mu.Unlock()
	res, err := ws.b.RegisterWorker(ctx, backend.RegisterWorkerParams{
		Worker: info, DeadAfter: WorkerDeadAfter, ExpireAfter: WorkerExpireAfter, Now: now,
	})
	if err != nil {
		return "", fmt.Errorf("register worker %s: %w", wid, err)
	}
	ws.mu.Lock()
	e.command = e.command.Stronger(res.Command)
	cmd := e.command
	ws.mu.Unlock()
	return cmd, nil
}

// beat refreshes wid's entry with the state the worker reports and
// returns the command recorded for it.
func (ws *workers) beat(ctx context.Context, b beatArgs, now time.Time) (backend.WorkerCommand, error) {
	ws.mu.Lock()
	if e := ws.m[b.WID]; e != nil {
		switch b.CurrentState {
		case "quiet":
			e.info.State = backend.WorkerQuiet
		case "terminate":
			e.info.State = backend.WorkerStopping
		}
	}
	ws.mu.Unlock()
	return ws.register(ctx, b.WID, now)
}

// command is the command wid last learned of ("" for none).
func (ws *workers) command(wid string) backend.WorkerCommand {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e := ws.m[wid]; e != nil {
		return e.command
	}
	return ""
}

// fetched notes that wid runs job id from queues.
func (ws *workers) fetched(wid string, queues []string, id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e := ws.m[wid]
	if e == nil {
		return
	}
	for _, q := range queues {
		if !slices.Contains(e.info.Queues, q) && len(e.info.Queues) < 100 {
			e.info.Queues = append(e.info.Queues, q)
		}
	}
	if len(e.info.Running) < 10000 {
		e.info.Running = append(e.info.Running, id)
	}
}

// finished notes the end of job id's attempt under wid.
func (ws *workers) finished(wid, id string, failed bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e := ws.m[wid]
	if e == nil {
		return
	}
	e.info.Running = slices.DeleteFunc(e.info.Running, func(r string) bool { return r == id })
	e.info.Processed++
	if failed {
		e.info.Failed++
	}
}

// gone drops a connection of wid; the last one removes the entry from
// the registry.
func (ws *workers) gone(ctx context.Context, wid string) error {
	ws.mu.Lock()
	e := ws.m[wid]
	if e == nil {
		ws.mu.Unlock()
		return nil
	}
	e.conns--
	last := e.conns <= 0
	if last {
		delete(ws.m, wid)
	}
	ws.mu.Unlock()
	if !last {
		return nil
	}
	return ws.b.DeregisterWorker(ctx, backend.DeregisterWorkerParams{ID: wid})
}
