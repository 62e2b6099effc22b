package backend

import "time"

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
	return &c
}

// RegisterWorkerParams records Worker at Now: LastSeen = Now, DeadAt =
// Now+DeadAfter, ExpiresAt = Now+ExpireAfter. The entry replaces any
// earlier entry with the same id.
type RegisterWorkerParams struct {
	Worker      WorkerInfo
	DeadAfter   time.Duration
	ExpireAfter time.Duration
	Now         time.Time
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
	return nil
}

// Registered returns the entry as stored for p: a copy of p.Worker with
// the times set.
func (p *RegisterWorkerParams) Registered() *WorkerInfo {
	w := p.Worker.Clone()
	w.LastSeen = p.Now
	w.DeadAt = p.Now.Add(p.DeadAfter)
	w.ExpiresAt = p.Now.Add(p.ExpireAfter)
	w.Dead = false
	return w
}
