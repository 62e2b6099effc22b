package backend

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Importer writes jobs that already have a life: a job taken from another
// store (kyu export, kyu import, kyu copy) keeps its id, state, attempts,
// errors, result, logs, progress and timestamps. Every store implements
// it; Backend embeds it.
//
// # Semantics
//
// Import takes each job of the batch in order and gives it one outcome:
//
//   - ImportCreated: no job had its id; the job is written exactly as
//     given (every field, times at ImportPrecision, see
//     ImportParams.Check; the Redis store keeps milliseconds), indexed for its state (a pending job is
//     claimable and wakes its queue's subscribers, a scheduled or retry job
//     waits for its RunAt, a final job's ExpiresAt drives retention as for
//     any final job), and it holds its unique key if its key holds at Now
//     (see HoldsKey), and its JID if it has one.
//   - ImportSame: a job with the id exists and SameJob finds no field that
//     differs (SameJobAt the store's precision, for a store that keeps
//     times coarser than ImportPrecision): nothing is written. A second import of the same jobs
//     reports every one ImportSame, so an import interrupted anywhere is
//     completed by running it again.
//   - ImportConflict: nothing is written for the job, and Reason says why:
//     a job with the id exists and differs (Reason names the first field
//     that differs), or the job's unique key holds at Now and another job
//     (HolderID) holds the same (queue, key) in the store, or an earlier
//     job of the same batch took it, or the job's JID is held by another
//     job (HolderID), checked before the unique key.
//
// Each job is written atomically (all of it or none of it); the batch as a
// whole is not: a crash may leave the first jobs of a batch written and
// the others not, which a rerun completes. A job in state active cannot be
// imported (its lease belongs to the store it came from): the check
// refuses it, and the caller decides whether to make it pending first
// (see kyu import --active).
//
// Import changes no counter of Stats' per-minute history, no queue's
// settings (UpdateQueue does that) and no worker entry. A unique key whose
// holder was deleted within its UniqueFor period is not carried (there is
// no job to carry it).
type Importer interface {
	// Import writes jobs with their history; see the Importer doc.
	Import(ctx context.Context, p ImportParams) (ImportResult, error)
}

// MaxImportBatch is the most jobs one Import may carry.
const MaxImportBatch = 1000

// ImportParams writes Jobs as they are. Now is the caller's clock: it
// decides only whether a unique key still holds (HoldsKey).
type ImportParams struct {
	Jobs []*Job
	Now  time.Time
}

// ImportOutcome is what Import did with one job.
type ImportOutcome string

// Import outcomes.
const (
	ImportCreated  ImportOutcome = "created"
	ImportSame     ImportOutcome = "same"
	ImportConflict ImportOutcome = "conflict"
)

// ImportItem is the outcome for one job, in the same position.
type ImportItem struct {
	Outcome ImportOutcome `json:"outcome"`
	// Reason says why a job was refused (ImportConflict only).
	Reason string `json:"reason,omitempty"`
	// HolderID names the job that holds the unique key, for a conflict of
	// keys.
	HolderID string `json:"holder_id,omitempty"`
}

// ImportResult has one ImportItem per job, in order.
type ImportResult struct {
	Items []ImportItem `json:"items"`
}

// Check validates an import and normalizes its jobs: the caller's jobs
// are left as they were, and p.Jobs holds copies whose times are in UTC,
// truncated to ImportPrecision, and whose empty
// slices and maps are nil. It refuses: no Now, more than MaxImportBatch
// jobs, a nil job, an id that is not a UUID or that appears twice, an
// active or unknown state, and any field a new job could not have (as
// Enqueue checks it) or a record could not hold: a negative Attempt,
// LeaseToken or LogsDropped, a zero CreatedAt, a time outside
// [MinTime, MaxTime), a progress outside [0, 100].
func (p *ImportParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	if len(p.Jobs) > MaxImportBatch {
		return invalid("jobs", "%d jobs is over the maximum of %d per import", len(p.Jobs), MaxImportBatch)
	}
	p.Now = p.Now.UTC().Truncate(ImportPrecision)
	jobs := make([]*Job, len(p.Jobs))
	seen := make(map[string]bool, len(p.Jobs))
	for i, j := range p.Jobs {
		if j == nil {
			return &ValidationError{Index: i, Field: "job", Reason: "missing"}
		}
		if err := checkImported(j); err != nil {
			err.Index = i
			return err
		}
		if seen[j.ID] {
			return &ValidationError{Index: i, Field: "id", Reason: fmt.Sprintf("%s appears twice in the batch", j.ID)}
		}
		seen[j.ID] = true
		jobs[i] = NormalizeJob(j)
	}
	p.Jobs = jobs
	return nil
}

func checkImported(j *Job) *ValidationError {
	if _, err := uuid.Parse(j.ID); err != nil || len(j.ID) != 36 {
		return invalid("id", "%q is not a job id (a UUID)", j.ID)
	}
	switch {
	case !j.State.Valid():
		return invalid("state", "unknown state %q", j.State)
	case j.State == StateActive:
		return invalid("state", "job %s is active: its lease belongs to the store it came from", j.ID)
	case j.Queue == "":
		return invalid("queue", "must not be empty")
	case j.MaxAttempts < 1:
		return invalid("max_attempts", "%d is less than 1", j.MaxAttempts)
	case j.Timeout <= 0:
		return invalid("timeout", "must be positive")
	case j.Attempt < 0:
		return invalid("attempt", "must not be negative")
	case j.LeaseToken < 0:
		return invalid("lease_token", "must not be negative")
	case j.LogsDropped < 0:
		return invalid("logs_dropped", "must not be negative")
	case j.CreatedAt.IsZero():
		return invalid("created_at", "must be given")
	case j.RunAt.IsZero():
		return invalid("run_at", "must be given")
	case len(j.Logs) > LogLinesLimit:
		return invalid("logs", "%d lines is over the maximum of %d", len(j.Logs), LogLinesLimit)
	}
	nj := NewJob{
		Type: j.Type, Queue: j.Queue, Payload: j.Payload, Title: j.Title, Priority: j.Priority,
		RunAt: j.RunAt, MaxAttempts: j.MaxAttempts, Timeout: j.Timeout, UniqueKey: j.UniqueKey,
		UniqueFor: j.UniqueFor, JID: j.JID, Tags: j.Tags, Metadata: j.Metadata, Retention: j.Retention,
	}
	if err := nj.prepare(j.CreatedAt, DefaultMaxPayload); err != nil {
		return err
	}
	for name, t := range map[string]time.Time{
		"created_at": j.CreatedAt, "started_at": j.StartedAt, "finished_at": j.FinishedAt,
		"deadline": j.Deadline, "lease_expires_at": j.LeaseExpiresAt, "expires_at": j.ExpiresAt,
	} {
		if !InTimeRange(t) {
			return invalid(name, timeRangeReason)
		}
	}
	for name, t := range map[string]string{"worker_id": j.WorkerID, "cancel_reason": j.CancelReason} {
		if !ValidText(t) || len(t) > 1024 {
			return invalid(name, "not text of at most 1 KiB")
		}
	}
	for _, e := range j.Errors {
		if !InTimeRange(e.At) || !ValidText(e.Message) || !ValidText(e.Stack) || !ValidText(e.Kind) {
			return invalid("errors", "an attempt's error is not text, or its time is "+timeRangeReason)
		}
	}
	if pr := j.Progress; pr != nil {
		if pr.Percent < 0 || pr.Percent > 100 || pr.Percent != pr.Percent || !ValidText(pr.Message) || !InTimeRange(pr.At) {
			return invalid("progress", "percent must be within [0, 100], its message text")
		}
	}
	for _, l := range j.Logs {
		if !ValidText(l.Line) || len(l.Line) > MaxLogLine || !InTimeRange(l.At) {
			return invalid("logs", "a line is not text of at most 8 KiB, or its time is "+timeRangeReason)
		}
	}
	return nil
}

// ImportPrecision is the precision at which Import writes times and
// SameJob compares them: what PostgreSQL and MySQL keep. The Redis store
// keeps milliseconds, and compares at that precision (SameJobAt).
const ImportPrecision = time.Microsecond

// NormalizeJob returns a copy of j with every time in UTC at
// ImportPrecision and empty slices and maps as nil: the form in which
// Import writes a job, and in which SameJob compares two.
func NormalizeJob(j *Job) *Job { return NormalizeJobAt(j, ImportPrecision) }

// NormalizeJobAt is NormalizeJob with times (and Timeout and UniqueFor)
// truncated to prec.
func NormalizeJobAt(j *Job, prec time.Duration) *Job {
	microUTC := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC().Truncate(prec)
	}
	c := j.Clone()
	c.Timeout = c.Timeout.Truncate(prec)
	c.UniqueFor = c.UniqueFor.Truncate(prec)
	for _, t := range []*time.Time{&c.RunAt, &c.Deadline, &c.CreatedAt, &c.StartedAt, &c.FinishedAt, &c.LeaseExpiresAt, &c.ExpiresAt} {
		*t = microUTC(*t)
	}
	for i := range c.Errors {
		c.Errors[i].At = microUTC(c.Errors[i].At)
	}
	for i := range c.Logs {
		c.Logs[i].At = microUTC(c.Logs[i].At)
	}
	if c.Progress != nil {
		c.Progress.At = microUTC(c.Progress.At)
	}
	if len(c.Payload) == 0 {
		c.Payload = nil
	}
	if len(c.Result) == 0 {
		c.Result = nil
	}
	if len(c.Tags) == 0 {
		c.Tags = nil
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	if len(c.Errors) == 0 {
		c.Errors = nil
	}
	if len(c.Logs) == 0 {
		c.Logs = nil
	}
	return c
}

// SameJob compares two jobs field by field, times at ImportPrecision and
// an empty slice or map equal to a missing one. It returns the JSON name
// of the first field that differs, or "" when the jobs are the same.
func SameJob(a, b *Job) string { return SameJobAt(a, b, ImportPrecision) }

// SameJobAt is SameJob with times compared at prec (a store that keeps
// coarser times than ImportPrecision compares at its own).
func SameJobAt(a, b *Job, prec time.Duration) string {
	x, y := NormalizeJobAt(a, prec), NormalizeJobAt(b, prec)
	switch {
	case x.ID != y.ID:
		return "id"
	case x.Type != y.Type:
		return "type"
	case x.Queue != y.Queue:
		return "queue"
	case !bytes.Equal(x.Payload, y.Payload):
		return "payload"
	case x.Title != y.Title:
		return "title"
	case x.Priority != y.Priority:
		return "priority"
	case x.State != y.State:
		return "state"
	case x.Attempt != y.Attempt:
		return "attempt"
	case x.MaxAttempts != y.MaxAttempts:
		return "max_attempts"
	case !x.RunAt.Equal(y.RunAt):
		return "run_at"
	case x.Timeout != y.Timeout:
		return "timeout"
	case !x.Deadline.Equal(y.Deadline):
		return "deadline"
	case x.UniqueKey != y.UniqueKey:
		return "unique_key"
	case x.UniqueFor != y.UniqueFor:
		return "unique_for"
	case x.JID != y.JID:
		return "jid"
	case !slices.Equal(x.Tags, y.Tags):
		return "tags"
	case !maps.Equal(x.Metadata, y.Metadata):
		return "metadata"
	case x.Retention != y.Retention:
		return "retention"
	case !x.CreatedAt.Equal(y.CreatedAt):
		return "created_at"
	case !x.StartedAt.Equal(y.StartedAt):
		return "started_at"
	case !x.FinishedAt.Equal(y.FinishedAt):
		return "finished_at"
	case x.WorkerID != y.WorkerID:
		return "worker_id"
	case x.LeaseToken != y.LeaseToken:
		return "lease_token"
	case !x.LeaseExpiresAt.Equal(y.LeaseExpiresAt):
		return "lease_expires_at"
	case !slices.EqualFunc(x.Errors, y.Errors, func(e, f AttemptError) bool {
		return e.Attempt == f.Attempt && e.At.Equal(f.At) && e.Kind == f.Kind && e.Message == f.Message && e.Stack == f.Stack
	}):
		return "errors"
	case !bytes.Equal(x.Result, y.Result):
		return "result"
	case x.CancelReason != y.CancelReason:
		return "cancel_reason"
	case x.CancelRequested != y.CancelRequested:
		return "cancel_requested"
	case (x.Progress == nil) != (y.Progress == nil),
		x.Progress != nil && (x.Progress.Percent != y.Progress.Percent || x.Progress.Message != y.Progress.Message || !x.Progress.At.Equal(y.Progress.At)):
		return "progress"
	case !slices.EqualFunc(x.Logs, y.Logs, func(e, f LogLine) bool { return e.Line == f.Line && e.At.Equal(f.At) }):
		return "logs"
	case x.LogsDropped != y.LogsDropped:
		return "logs_dropped"
	case !x.ExpiresAt.Equal(y.ExpiresAt):
		return "expires_at"
	}
	return ""
}

// HoldsKey reports whether an imported job holds its unique key at now:
// it has a key and either a UniqueFor period that has not ended
// (now < CreatedAt+UniqueFor), or no period and a state that is not final.
func HoldsKey(j *Job, now time.Time) bool {
	switch {
	case j.UniqueKey == "":
		return false
	case j.UniqueFor > 0:
		return now.Before(j.CreatedAt.Add(j.UniqueFor))
	}
	return !j.State.Final()
}

// ImportDiffers is the Reason of a conflict on a job's id.
func ImportDiffers(id, field string) string {
	return fmt.Sprintf("job %s already exists with a different %s", id, field)
}

// ImportJIDHeld is the Reason of a conflict on a JID held by another job.
func ImportJIDHeld(id, jid, holder string) string {
	return fmt.Sprintf("job %s: jid %q is held by job %s", id, jid, holder)
}

// ImportKeyHeld is the Reason of a conflict on a unique key.
func ImportKeyHeld(id, queue, key, holder string) string {
	return fmt.Sprintf("job %s: unique key %q of queue %s is held by job %s", id, key, queue, holder)
}
