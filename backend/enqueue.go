package backend

import (
	"slices"
	"time"
)

// Defaults and limits applied to every new job.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 25
	DefaultTimeout     = 30 * time.Minute
	DefaultMaxPayload  = 10 << 20 // 10 MiB
	MinPriority        = -100
	MaxPriority        = 100
)

// Size limits of a new job's text, in bytes, the same for every store and
// every caller. Metadata counts the bytes of its keys and values.
const (
	MaxType     = 256
	MaxTitle    = 1 << 10 // 1 KiB
	MaxTags     = 32
	MaxTag      = 128
	MaxMetadata = 64 << 10 // 64 KiB
	MaxJID      = 256
)

// ValidQueueName reports whether name is a legal queue name:
// 1 to 128 characters of [A-Za-z0-9._:-].
func ValidQueueName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// The range of times a job may carry, as Unix seconds, so that every store
// (some keep Unix nanoseconds in an int64) keeps them exactly: from
// 1970-01-01 to the end of 2261, UTC.
const (
	minUnix = 0
	maxUnix = 9214646400 // 2262-01-01T00:00:00Z
)

// MinTime and MaxTime bound the times a job may carry: [MinTime, MaxTime).
func MinTime() time.Time { return time.Unix(minUnix, 0).UTC() }

// MaxTime is the first instant after the range of times a job may carry.
func MaxTime() time.Time { return time.Unix(maxUnix, 0).UTC() }

// InTimeRange reports whether t is zero or within [MinTime, MaxTime).
func InTimeRange(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	u := t.Unix()
	return u >= minUnix && u < maxUnix
}

// timeRangeReason is the reason given for a time out of range.
const timeRangeReason = "outside the years 1970 to 2261"

// NewJob is what a producer asks for. Zero fields take the defaults above.
type NewJob struct {
	Type     string
	Queue    string
	Payload  []byte
	Title    string
	Priority int
	// RunAt is when the job may first run; zero or not after Now means at once.
	RunAt       time.Time
	MaxAttempts int
	Timeout     time.Duration
	// Deadline, if set, is when the job is discarded (cancelled with the
	// reason "deadline") if it has not started by then.
	Deadline time.Time
	// UniqueKey, if set, refuses a second job with the same key in the same
	// queue until this one is final, or, when UniqueFor is set, for exactly
	// UniqueFor from enqueue whatever happens to the job.
	UniqueKey string
	UniqueFor time.Duration
	// JID, if set, is a second id the caller chose for the job (Faktory's
	// jid), unique across the whole store while the job exists: a job whose
	// JID is held is refused as a duplicate of its holder (as for a unique
	// key, and checked before it), and Get finds a job by its JID. Deleting
	// the job, by request or by retention, frees it.
	JID       string
	Tags      []string
	Metadata  map[string]string
	Retention Retention
}

// EnqueueParams writes Jobs atomically: all of them or, on any error, none.
type EnqueueParams struct {
	Jobs []NewJob
	// Now is the caller's clock: CreatedAt, and the base for RunAt and UniqueFor.
	Now time.Time
	// MaxPayload bounds each payload in bytes; 0 means DefaultMaxPayload.
	MaxPayload int
}

// EnqueuedJob is the outcome for one NewJob, in the same position.
type EnqueuedJob struct {
	ID    string
	State State
	// Duplicate is true when the unique key was held: ID and State are then
	// the holder's, and nothing was written for this item.
	Duplicate bool
}

// EnqueueResult lists one EnqueuedJob per NewJob.
type EnqueueResult struct {
	Jobs []EnqueuedJob
}

// Prepare applies defaults to every job and validates it; backends call it
// before writing anything. It works on its own copy of Jobs, so the
// caller's slice is left as it was. The error is a *ValidationError naming
// the item and field.
func (p *EnqueueParams) Prepare() error {
	maxPayload := p.MaxPayload
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	p.Jobs = slices.Clone(p.Jobs)
	for i := range p.Jobs {
		if err := p.Jobs[i].prepare(p.Now, maxPayload); err != nil {
			err.Index = i
			return err
		}
	}
	return nil
}

func (j *NewJob) prepare(now time.Time, maxPayload int) *ValidationError {
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	if j.Timeout == 0 {
		j.Timeout = DefaultTimeout
	}
	switch {
	case j.Type == "":
		return invalid("type", "must not be empty")
	case len(j.Type) > MaxType:
		return invalid("type", "longer than %d bytes", MaxType)
	case len(j.Title) > MaxTitle:
		return invalid("title", "%d bytes is over the maximum of %d", len(j.Title), MaxTitle)
	case len(j.Tags) > MaxTags:
		return invalid("tags", "%d tags is over the maximum of %d", len(j.Tags), MaxTags)
	case MetadataSize(j.Metadata) > MaxMetadata:
		return invalid("metadata", "%d bytes of keys and values is over the maximum of %d", MetadataSize(j.Metadata), MaxMetadata)
	case !ValidQueueName(j.Queue):
		return invalid("queue", "%q is not 1-128 characters of [A-Za-z0-9._:-]", j.Queue)
	case j.Priority < MinPriority || j.Priority > MaxPriority:
		return invalid("priority", "%d is outside [%d, %d]", j.Priority, MinPriority, MaxPriority)
	case len(j.Payload) > maxPayload:
		return invalid("payload", "%d bytes is over the maximum of %d", len(j.Payload), maxPayload)
	case j.MaxAttempts < 1:
		return invalid("max_attempts", "%d is less than 1", j.MaxAttempts)
	case j.Timeout < 0:
		return invalid("timeout", "must not be negative")
	case !j.Deadline.IsZero() && !j.Deadline.After(laterOf(j.RunAt, now)):
		return invalid("deadline", "must be after run_at (or after now for a job that runs at once): the job could never start")
	case j.UniqueFor < 0:
		return invalid("unique_for", "must not be negative")
	case j.UniqueFor > 0 && j.UniqueKey == "":
		return invalid("unique_for", "needs a unique_key")
	case len(j.UniqueKey) > 1024:
		return invalid("unique_key", "longer than 1024 bytes")
	case !ValidText(j.Type):
		return invalid("type", textReason)
	case !ValidText(j.Title):
		return invalid("title", textReason)
	case !ValidText(j.UniqueKey):
		return invalid("unique_key", textReason)
	case len(j.JID) > MaxJID:
		return invalid("jid", "longer than %d bytes", MaxJID)
	case !ValidText(j.JID):
		return invalid("jid", textReason)
	case !j.Retention.Valid():
		return invalid("retention", "unknown value %d", int64(j.Retention))
	case !InTimeRange(j.RunAt):
		return invalid("run_at", timeRangeReason)
	case !InTimeRange(j.Deadline):
		return invalid("deadline", timeRangeReason)
	case !InTimeRange(now.Add(j.UniqueFor)):
		return invalid("unique_for", "ends "+timeRangeReason)
	}
	for _, t := range j.Tags {
		if len(t) > MaxTag {
			return invalid("tags", "a tag of %d bytes is over the maximum of %d", len(t), MaxTag)
		}
		if !ValidText(t) {
			return invalid("tags", textReason)
		}
	}
	for k, v := range j.Metadata {
		if !ValidText(k) || !ValidText(v) {
			return invalid("metadata", textReason)
		}
	}
	return nil
}

// MetadataSize is the size MaxMetadata bounds: the bytes of every key and
// value.
func MetadataSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// Record builds the stored Job for a prepared NewJob with the given id.
// Backends use it so every store fills the fields the same way.
func (j *NewJob) Record(id string, now time.Time) *Job {
	runAt := j.RunAt
	state := StatePending
	if runAt.IsZero() || !runAt.After(now) {
		runAt = now
	} else {
		state = StateScheduled
	}
	return &Job{
		ID:          id,
		Type:        j.Type,
		Queue:       j.Queue,
		Payload:     cloneBytes(j.Payload),
		Title:       j.Title,
		Priority:    j.Priority,
		State:       state,
		MaxAttempts: j.MaxAttempts,
		RunAt:       runAt,
		Timeout:     j.Timeout,
		Deadline:    j.Deadline,
		UniqueKey:   j.UniqueKey,
		UniqueFor:   j.UniqueFor,
		JID:         j.JID,
		Tags:        append([]string(nil), j.Tags...),
		Metadata:    cloneMap(j.Metadata),
		Retention:   j.Retention,
		CreatedAt:   now,
	}
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// laterOf returns the later of two times.
func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
