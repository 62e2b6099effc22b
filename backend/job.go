package backend

import "time"

// State is where a job is in its life.
//
//	scheduled ──(run-at reached)──▶ pending ──(claim)──▶ active
//	active ──(complete)──▶ completed
//	active ──(fail, attempts left)──▶ retry ──(retry time)──▶ pending
//	active ──(fail, final or attempts used)──▶ failed
//	active ──(lease expired)──▶ pending | failed
//	active ──(release)──▶ pending
//	scheduled | pending | retry ──(deadline passed)──▶ cancelled
type State string

// The states of a job.
const (
	StateScheduled State = "scheduled"
	StatePending   State = "pending"
	StateActive    State = "active"
	StateRetry     State = "retry"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// States lists every state in lifecycle order, in a new slice each call.
func States() []State {
	return []State{StateScheduled, StatePending, StateActive, StateRetry, StateCompleted, StateFailed, StateCancelled}
}

// Final reports whether a job in this state will never run again.
func (s State) Final() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	switch s {
	case StateScheduled, StatePending, StateActive, StateRetry, StateCompleted, StateFailed, StateCancelled:
		return true
	}
	return false
}

// ParseState turns a state's name into a State, refusing unknown names.
func ParseState(name string) (State, error) {
	s := State(name)
	if !s.Valid() {
		return "", invalid("state", "unknown state %q", name)
	}
	return s, nil
}

// Reasons a job was cancelled, stored in Job.CancelReason.
const (
	CancelReasonDeadline  = "deadline"
	CancelReasonRequested = "requested"
	// CancelReasonHandler: the handler ended its job with kyu.Cancel.
	CancelReasonHandler = "handler"
)

// Kinds of AttemptError.
const (
	// AttemptFailed is an attempt whose handler returned an error or panicked.
	AttemptFailed = "failed"
	// AttemptLeaseExpired is an attempt whose lease ran out before it finished.
	AttemptLeaseExpired = "lease_expired"
	// AttemptInterrupted is an attempt handed back by Release (shutdown); it
	// does not count against MaxAttempts.
	AttemptInterrupted = "interrupted"
	// AttemptCancelled is an attempt whose handler cancelled its job
	// (FailItem.Cancel).
	AttemptCancelled = "cancelled"
)

// AttemptError records how one attempt of a job ended when it did not succeed.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Stack   string    `json:"stack,omitempty"`
}

// Job is a job as stored: everything a backend keeps about it.
type Job struct {
	ID          string        `json:"id"`
	Type        string        `json:"type"`
	Queue       string        `json:"queue"`
	Payload     []byte        `json:"payload"`
	Title       string        `json:"title,omitempty"`
	Priority    int           `json:"priority"`
	State       State         `json:"state"`
	Attempt     int           `json:"attempt"`
	MaxAttempts int           `json:"max_attempts"`
	RunAt       time.Time     `json:"run_at"`
	Timeout     time.Duration `json:"timeout"`
	Deadline    time.Time     `json:"deadline,omitzero"`
	UniqueKey   string        `json:"unique_key,omitempty"`
	UniqueFor   time.Duration `json:"unique_for,omitempty"`
	// JID is the caller's own id for the job, if it gave one (see NewJob.JID).
	JID       string            `json:"jid,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Retention Retention         `json:"retention"`

	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`

	// WorkerID, LeaseToken and LeaseExpiresAt describe the current lease
	// while the job is active. LeaseToken only grows for a job; a claim
	// returns the new token, and every call on the lease must present it.
	WorkerID       string    `json:"worker_id,omitempty"`
	LeaseToken     int64     `json:"lease_token"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`

	Errors       []AttemptError `json:"errors,omitempty"`
	Result       []byte         `json:"result,omitempty"`
	CancelReason string         `json:"cancel_reason,omitempty"`
	// CancelRequested is set on an active job by Cancel; the job ends
	// cancelled however its attempt ends.
	CancelRequested bool `json:"cancel_requested,omitempty"`

	// Progress is the latest progress reported; Logs the lines logged (at
	// most the cap, the first ones) and LogsDropped those past the cap.
	Progress    *Progress `json:"progress,omitempty"`
	Logs        []LogLine `json:"logs,omitempty"`
	LogsDropped int       `json:"logs_dropped,omitempty"`

	// ExpiresAt is when retention deletes this final job (see Expiry);
	// zero while the job is not final, or when it is kept forever.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Clone returns a deep copy of j, so a caller may keep or change it freely.
func (j *Job) Clone() *Job {
	if j == nil {
		return nil
	}
	return j.CloneInto(new(Job))
}

// CloneInto makes dst a deep copy of j, as Clone does, overwriting all of
// dst, and returns dst: a store that keeps a job's copies side by side
// allocates them together.
func (j *Job) CloneInto(dst *Job) *Job {
	*dst = *j
	dst.Payload = cloneBytes(j.Payload)
	dst.Result = cloneBytes(j.Result)
	if j.Tags != nil {
		dst.Tags = append([]string(nil), j.Tags...)
	}
	dst.Metadata = cloneMap(j.Metadata)
	if j.Errors != nil {
		dst.Errors = append([]AttemptError(nil), j.Errors...)
	}
	if j.Progress != nil {
		p := *j.Progress
		dst.Progress = &p
	}
	if j.Logs != nil {
		dst.Logs = append([]LogLine(nil), j.Logs...)
	}
	return dst
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
