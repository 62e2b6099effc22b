package pebble

import (
	"bytes"

	"github.com/kyuhq/kyu/backend"
)

// The in-memory indexes, rebuilt from storage when the store opens and kept
// under Store.mu. They hold ids and times, never payloads, and no records
// but those of active jobs (see lease).
// Entries are removed lazily: whoever pops an entry reads the job's record
// and drops the entry when it no longer matches (the job moved on, or was
// deleted). Time values are timeCode values (Unix nanoseconds).

// readyEntry is a pending job in its queue's ready heap.
type readyEntry struct {
	runAt int64
	id    jobID
	prio  int8
}

// before orders by priority (higher first), run-at (earlier first), id.
func (a readyEntry) before(b readyEntry) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.runAt != b.runAt {
		return a.runAt < b.runAt
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// timeEntry is a job due for something at a time.
type timeEntry struct {
	at int64
	id jobID
}

func (a timeEntry) before(b timeEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// uniqueExpiry is a unique key whose UniqueFor period ends at until.
type uniqueExpiry struct {
	until int64
	name  string
}

func (a uniqueExpiry) before(b uniqueExpiry) bool { return a.until < b.until }

// queueIndex holds one queue's waiting jobs.
type queueIndex struct {
	// ready holds pending jobs in claim order.
	ready minHeap[readyEntry]
	// timers holds scheduled and retry jobs by run-at.
	timers minHeap[timeEntry]
}

// lease is the live claim on an active job. It may carry the job's
// current record, so that heartbeats and outcomes need not read it back
// from storage: active jobs are few (at most the leases workers hold), so
// their records are the one kind kept in memory.
type lease struct {
	token   int64
	expires int64
	// job is the current record when known (nil after a rebuild), with
	// whether the job has a payload.
	job        *backend.Job
	hasPayload bool
}

// indexes are all the in-memory indexes of a store.
type indexes struct {
	queues map[string]*queueIndex
	// leases has an entry for every active job.
	leases map[jobID]lease
	// leaseExpiry orders active jobs by lease expiry (stale entries are
	// dropped when the lease map disagrees).
	leaseExpiry minHeap[timeEntry]
	// deadlines orders jobs with a deadline that may still be waiting.
	deadlines minHeap[timeEntry]
	// retention orders final jobs by the time retention deletes them.
	retention minHeap[timeEntry]
	// uniques maps uniqueName(queue, key) to its holder.
	uniques map[string]uniqueValue
	// uniqueExpiry orders unique keys held for a UniqueFor period.
	uniqueExpiry minHeap[uniqueExpiry]
}

func newIndexes() *indexes {
	return &indexes{
		queues:  make(map[string]*queueIndex),
		leases:  make(map[jobID]lease),
		uniques: make(map[string]uniqueValue),
	}
}

func (x *indexes) queue(name string) *queueIndex {
	q := x.queues[name]
	if q == nil {
		q = &queueIndex{}
		x.queues[name] = q
	}
	return q
}

// index adds a job to the indexes that its current state calls for. It does
// not touch unique keys.
func (x *indexes) index(id jobID, j *backend.Job) {
	switch j.State {
	case backend.StatePending:
		x.queue(j.Queue).ready.push(readyEntry{runAt: timeCode(j.RunAt), id: id, prio: int8(j.Priority)})
	case backend.StateScheduled, backend.StateRetry:
		x.queue(j.Queue).timers.push(timeEntry{at: timeCode(j.RunAt), id: id})
	case backend.StateActive:
		l := lease{token: j.LeaseToken, expires: timeCode(j.LeaseExpiresAt)}
		x.leases[id] = l
		x.leaseExpiry.push(timeEntry{at: l.expires, id: id})
	default:
		// A deletion time past the range of times (a long retention) is
		// never reached by a valid Now, and its timeCode would overflow.
		if at, ok := j.DeleteAt(); ok && backend.InTimeRange(at) {
			x.retention.push(timeEntry{at: timeCode(at), id: id})
		}
	}
}

// waiting reports whether a job in state s waits to be claimed.
func waiting(s backend.State) bool {
	return s == backend.StatePending || s == backend.StateScheduled || s == backend.StateRetry
}

// watchDeadline adds a waiting job with a deadline to the deadline heap. It
// is called when a job starts or resumes waiting (enqueue, release, retry,
// recovery); a duplicate entry is harmless.
func (x *indexes) watchDeadline(id jobID, j *backend.Job) {
	if !j.Deadline.IsZero() && waiting(j.State) {
		x.deadlines.push(timeEntry{at: timeCode(j.Deadline), id: id})
	}
}
