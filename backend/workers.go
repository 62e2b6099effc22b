package backend

import (
	"fmt"
	"time"
)

// WorkerInfo is a worker process's entry in the registry.
type WorkerInfo struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at"`
	Version     string    `json:"version"`
	// Running lists the ids of the jobs the worker runs now.
	Running []string `json:"running"`
	// Processed and Failed count the attempts the worker ended since it
	// started.
	Processed int64 `json:"processed"`
	Failed    int64 `json:"failed"`
	// State is what the worker says it does: running (also when empty,
	// from a worker that does not say), quiet or stopping.
	State WorkerState `json:"state,omitempty"`
	// Periodic lists the periodic schedules the worker runs, by name.
	Periodic []PeriodicInfo `json:"periodic,omitempty"`

	// Command is set by the store, not the worker: the command given by
	// CommandWorker and not yet gone with the entry (see WorkerCommand).
	// What a caller of RegisterWorker passes here is ignored.
	Command WorkerCommand `json:"command,omitempty"`

	// Set by the store: when the entry was last refreshed, when it counts
	// as dead (silent for too long) and when it expires.
	LastSeen  time.Time `json:"last_seen"`
	DeadAt    time.Time `json:"dead_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Dead is set by Workers: Now >= DeadAt.
	Dead bool `json:"dead"`
}

// Clone returns a deep copy of w.
func (w *WorkerInfo) Clone() *WorkerInfo {
	c := *w
	c.Queues = append([]string(nil), w.Queues...)
	c.Running = append([]string(nil), w.Running...)
	if w.Periodic != nil {
		c.Periodic = append([]PeriodicInfo(nil), w.Periodic...)
	}
	return &c
}

// WorkerState is what a worker reports it is doing.
type WorkerState string

// Worker states.
const (
	// WorkerRunning: claiming and running jobs.
	WorkerRunning WorkerState = "running"
	// WorkerQuiet: claiming nothing; the jobs in flight run to their end
	// and the process stays up.
	WorkerQuiet WorkerState = "quiet"
	// WorkerStopping: shutting down gracefully.
	WorkerStopping WorkerState = "stopping"
)

// WorkerCommand is a request to a worker process, given through the
// registry: CommandWorker records it on the worker's entry, and each
// RegisterWorker of that worker returns it (RegisterWorkerResult), so a
// worker learns it at its next registry refresh. The command stays on the
// entry until the entry goes (DeregisterWorker or expiry): delivery is at
// least once, and a worker obeys a command it already obeys by doing
// nothing. An entry holds one command, the strongest given: stop wins over
// quiet, and a command never goes back to a weaker one.
type WorkerCommand string

// Worker commands.
const (
	// CommandQuiet: stop claiming, let the jobs in flight end, stay up.
	CommandQuiet WorkerCommand = "quiet"
	// CommandStop: shut down gracefully (as kyu.Worker.Shutdown does).
	CommandStop WorkerCommand = "stop"
)

// Stronger returns the command an entry holding c keeps when given d:
// the stronger of the two (stop, then quiet, then none).
func (c WorkerCommand) Stronger(d WorkerCommand) WorkerCommand {
	if c == CommandStop || d == CommandStop {
		return CommandStop
	}
	if c == CommandQuiet || d == CommandQuiet {
		return CommandQuiet
	}
	return ""
}

// PeriodicInfo describes one periodic schedule that a worker runs: its
// name, its spec (as the worker's periodic package writes it), the queue
// and type of the jobs it enqueues, and its last and next run (zero when
// unknown or none).
type PeriodicInfo struct {
	Name    string    `json:"name"`
	Spec    string    `json:"spec"`
	Queue   string    `json:"queue"`
	Type    string    `json:"type"`
	LastRun time.Time `json:"last_run"`
	NextRun time.Time `json:"next_run"`
}

// ErrWorkerNotFound is CommandWorker's error for an id with no entry not
// expired at its Now. It matches ErrNotFound.
var ErrWorkerNotFound = fmt.Errorf("kyu: worker not registered: %w", ErrNotFound)

// RegisterWorkerParams records Worker at Now: LastSeen = Now, DeadAt =
// Now+DeadAfter, ExpiresAt = Now+ExpireAfter. The entry replaces any
// earlier entry with the same id, except its Command, which the store
// keeps (and returns in RegisterWorkerResult).
type RegisterWorkerParams struct {
	Worker      WorkerInfo
	DeadAfter   time.Duration
	ExpireAfter time.Duration
	Now         time.Time
}

// RegisterWorkerResult is RegisterWorker's answer: the command recorded
// on the worker's entry ("" for none), for the worker to obey.
type RegisterWorkerResult struct {
	Command WorkerCommand
}

// CommandWorkerParams gives Command to the worker ID, whose entry must not
// be expired at Now (ErrWorkerNotFound otherwise, a dead entry is fine).
// The entry keeps the stronger of its command and Command
// (WorkerCommand.Stronger), so a repeated call changes nothing.
type CommandWorkerParams struct {
	ID      string
	Command WorkerCommand
	Now     time.Time
}

// Check validates a command.
func (p *CommandWorkerParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	switch {
	case p.ID == "" || len(p.ID) > 256 || !ValidText(p.ID):
		return invalid("id", "must be 1 to 256 bytes of text")
	case p.Command != CommandQuiet && p.Command != CommandStop:
		return invalid("command", "%q is not %q or %q", p.Command, CommandQuiet, CommandStop)
	}
	return nil
}

// DeregisterWorkerParams removes a worker's entry (a clean stop). An
// unknown id is not an error.
type DeregisterWorkerParams struct {
	ID string
}

// WorkersParams lists the entries that have not expired at Now, by id.
type WorkersParams struct {
	Now time.Time
}

// Check validates a registration.
func (p *RegisterWorkerParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	switch {
	case p.Worker.ID == "" || len(p.Worker.ID) > 256:
		return invalid("worker.id", "must be 1 to 256 bytes")
	case !ValidText(p.Worker.ID) || !ValidText(p.Worker.Host) || !ValidText(p.Worker.Version):
		return invalid("worker", "id, host and version "+textReason)
	case p.DeadAfter <= 0:
		return invalid("dead_after", "must be positive")
	case p.ExpireAfter < p.DeadAfter:
		return invalid("expire_after", "must not be shorter than dead_after")
	case !InTimeRange(p.Now.Add(p.ExpireAfter)):
		return invalid("expire_after", "ends "+timeRangeReason)
	}
	for _, q := range p.Worker.Queues {
		if !ValidText(q) {
			return invalid("worker.queues", textReason)
		}
	}
	for _, id := range p.Worker.Running {
		if !ValidText(id) {
			return invalid("worker.running", textReason)
		}
	}
	switch p.Worker.State {
	case "", WorkerRunning, WorkerQuiet, WorkerStopping:
	default:
		return invalid("worker.state", "%q is not running, quiet or stopping", p.Worker.State)
	}
	if len(p.Worker.Periodic) > MaxPeriodic {
		return invalid("worker.periodic", "%d schedules; at most %d", len(p.Worker.Periodic), MaxPeriodic)
	}
	for _, s := range p.Worker.Periodic {
		if !ValidText(s.Name) || !ValidText(s.Spec) || !ValidText(s.Queue) || !ValidText(s.Type) ||
			len(s.Name)+len(s.Spec)+len(s.Queue)+len(s.Type) > 1024 {
			return invalid("worker.periodic", "name, spec, queue and type "+textReason+", together at most 1024 bytes")
		}
		if !InTimeRange(s.LastRun) || !InTimeRange(s.NextRun) {
			return invalid("worker.periodic", "last_run and next_run "+timeRangeReason)
		}
	}
	return nil
}

// MaxPeriodic bounds WorkerInfo.Periodic.
const MaxPeriodic = 1000

// Registered returns the entry as stored for p: a copy of p.Worker with
// the times set and no Command (a store puts back the one it keeps).
func (p *RegisterWorkerParams) Registered() *WorkerInfo {
	w := p.Worker.Clone()
	w.LastSeen = p.Now
	w.DeadAt = p.Now.Add(p.DeadAfter)
	w.ExpiresAt = p.Now.Add(p.ExpireAfter)
	w.Dead = false
	w.Command = ""
	return w
}
