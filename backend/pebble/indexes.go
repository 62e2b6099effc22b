package pebble

import (
	"bytes"
	"slices"

	"github.com/kyuhq/kyu/backend"
)

// The in-memory indexes, rebuilt from storage when the store opens and kept
// under Store.mu. They hold ids and times, never payloads, and no records
// but those of active jobs (see lease).
// Entries are removed lazily: whoever pops an entry reads the job's record
// and drops the entry when it no longer matches (the job moved on, or was
// deleted). Time values are timeCode values (Unix nanoseconds).

// readyEntry is a pending job in its queue's ready queue (ready.go).
type readyEntry struct {
	runAt int64
	id    jobID
	prio  int8
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

// queueIndex holds one queue's waiting jobs, and every job of the queue
// by state.
type queueIndex struct {
	// ready holds pending jobs in claim order.
	ready readyQueue
	// timers holds scheduled and retry jobs by run-at.
	timers minHeap[timeEntry]
	// byState holds the ids of the queue's jobs per state (indexed by
	// stateCode), exactly: every change of state moves the id in the same
	// section under mu. It serves List, Purge and RetryQueue in id order,
	// and the counts of Stats. Active jobs are the exception: they are
	// counted in active and found in the lease map (they are few), which
	// keeps the set work of a claim and a completion to one removal.
	byState [len(stateCodes)]idSet
	active  int
	// settings are the queue's persistent settings (queues.go).
	settings    backend.QueueSettings
	hasSettings bool
}

// lease is the live claim on an active job. It may carry the job's
// current record, so that heartbeats and outcomes need not read it back
// from storage: active jobs are few (at most the leases workers hold), so
// their records are the one kind kept in memory.
type lease struct {
	token   int64
	expires int64
	// queue is the job's queue (List and Stats find active jobs here).
	queue string
	// job is the current record when known (nil after a rebuild), with
	// what the job keeps under keys of its own.
	job *backend.Job
	sd  side
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
// not touch unique keys, nor the retention index of final jobs, which is
// in Pebble (putRetention).
func (x *indexes) index(id jobID, j *backend.Job) {
	switch j.State {
	case backend.StatePending:
		x.queue(j.Queue).ready.push(readyEntry{runAt: timeCode(j.RunAt), id: id, prio: int8(j.Priority)})
	case backend.StateScheduled, backend.StateRetry:
		x.queue(j.Queue).timers.push(timeEntry{at: timeCode(j.RunAt), id: id})
	case backend.StateActive:
		x.activate(id, j, nil, side{})
	}
}

// activate adds an active job's lease, carrying rec, the job's current
// record with sd, when it is not nil.
func (x *indexes) activate(id jobID, j, rec *backend.Job, sd side) {
	l := lease{token: j.LeaseToken, expires: timeCode(j.LeaseExpiresAt), queue: j.Queue, job: rec, sd: sd}
	x.leases[id] = l
	x.watchLease(id, l.expires)
}

// watchLease adds an active job's lease expiry to the leaseExpiry heap.
// Entries left by leases that ended or were extended are dropped only when
// they come out of the heap, which takes a lease period: a busy queue
// would hold one per claim and heartbeat of that period (a million after
// a drain of a million jobs). Once stale entries outnumber the live ones,
// with some slack, they are filtered out in one pass, so the heap holds
// at most about twice as many entries as there are leases, and each push
// costs O(1) amortized.
func (x *indexes) watchLease(id jobID, expires int64) {
	x.leaseExpiry.push(timeEntry{at: expires, id: id})
	if x.leaseExpiry.len() <= 2*len(x.leases)+leaseExpirySlack {
		return
	}
	x.leaseExpiry.filter(func(e timeEntry) bool {
		le, ok := x.leases[e.id]
		return ok && le.expires == e.at
	})
	x.leaseExpiry.shrink()
}

// leaseExpirySlack is how many stale entries the leaseExpiry heap may hold
// beyond as many as there are leases before watchLease filters them out.
const leaseExpirySlack = 4096

// track moves a job's id between the per-state sets of its queue: from ""
// for a new job, to "" for a deleted one.
func (x *indexes) track(queue string, id jobID, from, to backend.State) {
	if from == to {
		return
	}
	q := x.queue(queue)
	switch from {
	case "":
	case backend.StateActive:
		q.active--
	default:
		q.byState[stateCode(from)].remove(id)
	}
	switch to {
	case "":
	case backend.StateActive:
		q.active++
	default:
		q.byState[stateCode(to)].add(id)
	}
}

// count is the number of a queue's jobs in state st.
func (q *queueIndex) count(st backend.State) int {
	if st == backend.StateActive {
		return q.active
	}
	return q.byState[stateCode(st)].len()
}

// activeSets returns, per queue, the ids of the active jobs (from the
// lease map) as sets to walk; only queues for which want is true.
func (x *indexes) activeSets(want func(queue string) bool) []*idSet {
	byQueue := make(map[string][]jobID)
	for id, le := range x.leases {
		if want(le.queue) {
			byQueue[le.queue] = append(byQueue[le.queue], id)
		}
	}
	sets := make([]*idSet, 0, len(byQueue))
	for _, ids := range byQueue {
		slices.SortFunc(ids, compareID)
		sets = append(sets, &idSet{chunks: [][]jobID{ids}, n: len(ids)})
	}
	return sets
}

// queueRetention is the retention override of a queue.
func (x *indexes) queueRetention(queue string) backend.QueueRetention {
	if q := x.queues[queue]; q != nil {
		return q.settings.Retention
	}
	return backend.QueueRetention{}
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
