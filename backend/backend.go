// Package backend is the storage contract every kyu store implements: the
// embedded Pebble store, Redis, PostgreSQL and the remote (HTTP) backend
// (a kyu server). The root package kyu builds Client and Worker on it; the
// conformance suite in backend/backendtest proves that a store keeps every
// promise written here.
//
// # Roles
//
// Backend is the whole contract, and every store implements it whole. Its
// methods are grouped into small role interfaces by who calls them, so a
// caller asks only for what it uses and a reader sees the contract in
// pieces:
//
//   - Producer (Enqueue): whoever creates jobs (kyu.Client, the periodic
//     scheduler, the REST API).
//   - Runner (Claim, Heartbeat, Complete, Fail, Release, Report,
//     Subscribe): a worker, for the jobs it holds under a lease; Subscribe
//     is here because it wakes claimers.
//   - Inspector (Get, List, Stats, Workers, WatchFinished): reads that
//     change nothing (the dashboard, the CLI, kyu.Client); WatchFinished is
//     here because it serves whoever waits to read a job's end.
//   - Admin (Cancel, Retry, RunNow, RetryQueue, Purge, Delete,
//     UpdateQueue, CommandWorker): changes by request, outside any lease.
//   - Maintainer (Promote, RecoverLeases, ApplyRetention): the repeatable
//     steps a worker or server runs on a timer.
//   - Registry (RegisterWorker, DeregisterWorker): a worker process's own
//     entry; reading the registry is Inspector's Workers.
//
// A new part of the contract is a new role (or a method of the role whose
// callers use it) embedded in Backend, and a method of the wrapper that
// Checked returns, which runs its check.
//
// # Optional abilities
//
// An operation of the contract that a store cannot offer returns
// ErrNotSupported, and callers fall back: a store that cannot signal
// returns it from Subscribe and WatchFinished (callers poll), one without a
// registry from RegisterWorker. Abilities beyond the contract are optional
// interfaces that a caller finds with a type assertion, as
// database/sql/driver does (PayloadLimiter is one); there is no list of
// capability flags.
//
// # Time
//
// Every method takes the caller's time where it reads or sets one (the Now
// fields): a backend never reads its own clock, so tests control time and
// all processes sharing a store agree on one timeline up to their clock skew.
//
// # Settled semantics
//
// Every backend holds these; backendtest checks each.
//
//   - Order. Within a queue, claimable jobs are handed out by priority
//     (higher first), then RunAt (earlier first), then id (UUIDv7, so
//     enqueue order). A released or recovered job keeps its RunAt, so it
//     goes back near the front of its priority.
//   - Boundaries. A scheduled or retry job is claimable when RunAt <= Now;
//     a pending job is claimable whatever the claimer's clock says (its
//     state says it is due, and a claimer's clock may be behind the
//     producer's by the allowed skew). A lease is live
//     while Now < LeaseExpiresAt and dead from LeaseExpiresAt on. A job may
//     start while Now < Deadline; from Deadline on it is cancelled with the
//     reason "deadline" (by Claim or Promote), never handed out. A unique key
//     with UniqueFor holds while Now < CreatedAt+UniqueFor. Retention deletes
//     a final job when Now >= FinishedAt+keep.
//   - Attempts. A claim increments Attempt. A lease that expires has used its
//     attempt (recorded as lease_expired). Fail or RecoverLeases sends the
//     job to failed when Attempt >= MaxAttempts. Release decrements Attempt
//     again and records the attempt as interrupted.
//   - Checks. Enqueue validates with EnqueueParams.Prepare, every method
//     whose params have a Check with it, and every other call that takes
//     a Now with CheckNow; a failed check returns its *ValidationError and
//     changes nothing. The checks run in one place, backend.Checked, which
//     every store's Open puts in front of the store (see Checked).
//   - Fencing. Each claim sets LeaseToken to one more than the job's previous
//     token (the first claim gives 1). Heartbeat, Complete, Fail and Release
//     act only when the job is active, its LeaseToken equals the token given
//     and the lease is live at Now; otherwise they change nothing (Heartbeat
//     reports Lost; the others report ErrLeaseLost, or ErrNotFound for an
//     unknown id).
//   - Unique keys. Scope is (queue, key). Without UniqueFor the key is held
//     from enqueue until the job is final (or deleted). With UniqueFor it is
//     held for exactly that period from enqueue, whatever the job does, even
//     if it is deleted. A duplicate, including a second item with the same
//     key in one batch, reports Duplicate with the holder's id and state.
//   - Retention. When a job becomes final, Expiry (job retention, then the
//     queue's override for the state, then the default) decides: delete it
//     in that same step (its unique key as above), or keep it and set
//     ExpiresAt (zero: forever). A RetainNone job that completes with a
//     non-empty result is kept ResultGrace, so a waiter can read it.
//     ApplyRetention deletes a final job when Now >= ExpiresAt.
//   - Cancel. A scheduled, pending or retry job is cancelled at once
//     (reason "requested", FinishedAt = Now, unique key as for any final
//     job). An active job gets CancelRequested; Heartbeat reports it on a
//     live lease; and the attempt's end makes the job cancelled (reason
//     "requested") instead of what it would have been: Complete (the
//     result is stored), Fail (the error is recorded), Release (recorded
//     interrupted) and lease expiry (recorded lease_expired). Cancel of an
//     active job already requested changes nothing and is not an error; of
//     a final job it is a *StateError. FailItem.Cancel ends a job cancelled
//     with the reason "handler" (but "requested" when a cancel was requested
//     first). CancelRequested stays set on the final job, as a record.
//     Release of a requested job decrements Attempt as any Release does.
//   - Admin. Retry (failed, cancelled), RunNow (scheduled, retry) and their
//     errors as written on RetryParams and RunNowParams; Retry keeps the
//     job's Errors, RunNow leaves its Deadline alone. Cancel, Retry and
//     RunNow return the job as it is after the call (Cancel's job may
//     already be deleted under RetainNone). RetryQueue and
//     Purge act on the oldest jobs (by id) first. Delete and Purge never
//     touch an active job.
//   - Claim budget. With ClaimParams.MaxBytes > 0, Claim takes jobs in the
//     order it claims them (queue by queue as Mode gives, each queue in the
//     order above) and stops before the first job whose payload would take
//     the payload bytes claimed so far over MaxBytes; only payload bytes
//     count (len(Payload), the bulk of a job, which every store knows
//     without reading the payload). The first job of a claim is always
//     taken, whatever its size, so a job larger than the budget is still
//     handed out. A job the claim stops before is not touched (no attempt,
//     no lease), nor is any job after it, also in later queues; the claim
//     reports Truncated, and the next claim takes it first.
//   - Claim by type. With ClaimParams.Types, Claim takes, in the order
//     above (and queue by queue as Mode gives), only jobs whose Type is
//     listed; the others are skipped, not touched (still pending, no
//     attempt, no lease), and keep their place, so a later claim without
//     the filter takes them in order. The byte budget counts the taken
//     jobs only. A store may look at no more than ClaimTypeScan jobs of
//     other types per queue and claim: a filtered claim always finds a
//     matching job that has at most ClaimTypeScan others ahead of it in
//     its queue, and may return fewer jobs than match when more are.
//   - Pause. Claim hands out nothing from a paused queue, in both modes;
//     everything else (enqueue, promotion, finishing active jobs) goes on.
//   - Reports. Report needs a live lease as Complete does. Progress
//     replaces the previous one (its At set to Now); log lines are appended
//     with At = Now until the job holds the cap, then counted in
//     LogsDropped. Both survive retries and stay for the job's life.
//   - Listing. List orders by id; a cursor names the last id its page
//     covered (a page cut short by a bounded scan may cover ids it does
//     not return, or return none), so paging neither repeats nor skips a
//     job that matched throughout.
//   - Stats. Counts are exact at the moment they are read and agree with
//     List (a due scheduled job not yet promoted counts as scheduled). Each
//     Complete, Fail and recovered lease adds to the minute of its Now (see
//     MinuteCount); counters older than StatsHistory may be dropped by
//     ApplyRetention, the totals never.
//   - Registry. RegisterWorker upserts by id; Workers returns the entries
//     with ExpiresAt after Now, marking Dead those with DeadAt not after
//     Now; expired entries are never returned and may be removed by
//     ApplyRetention. CommandWorker records a command on a live or dead
//     entry (ErrWorkerNotFound for none), the entry keeps the strongest
//     command given, RegisterWorker keeps it (whatever the caller passes)
//     and returns it, Workers shows it, and it goes with the entry.
//   - Queue rates. Each Complete, Fail and recovered lease also adds to
//     its queue's counters of the minute of its Now; Stats sums them into
//     QueueInfo.LastFiveMinutes and LastHour. Counters older than
//     QueueStatsHistory may be dropped by ApplyRetention.
//   - Promotion. A scheduled or retry job is claimable as soon as
//     RunAt <= Now, whether or not Promote has run: Claim promotes the due
//     jobs of its queues itself. Promote's Moved counts promoted jobs;
//     Cancelled counts jobs it discarded by deadline. RecoverLeases' Moved
//     counts every recovered job, Failed those of them that went to failed.
//   - Records. StartedAt is the time of the latest claim. An attempt's
//     AttemptError carries the number the attempt ran as, also for an
//     interrupted attempt. Get returns a copy the caller owns, and a store
//     never keeps a caller's buffers.
//   - Wake-ups. Subscribe signals when a job becomes pending in a subscribed
//     queue (every queue when none is named): enqueue, Promote, Release,
//     RecoverLeases, Fail with a retry time not after Now, Retry, RunNow,
//     RetryQueue, and resuming a paused queue that holds pending jobs.
//     WatchFinished signals when a watched job becomes final or is deleted,
//     however that happens. A subscription hears every such event after
//     Subscribe or WatchFinished returns.
//   - Duplicates. A duplicate reports the holder's id and its state (for a
//     holder deleted within its UniqueFor period, the state it had when it
//     was deleted).
package backend

import (
	"context"
	"sync"
	"time"
)

// Backend is a job store: every role below, and Close. All methods are
// safe for concurrent use. A store implements Backend whole, and the
// conformance suite checks it whole; a caller asks only for the roles it
// uses (kyu.Client for Producer, Inspector and Admin; kyu.Worker for
// Producer, Runner, Maintainer and Registry).
type Backend interface {
	Producer
	Runner
	Inspector
	Admin
	Maintainer
	Registry
	// Leader elects the store's maintainer (see leader.go).
	Leader
	// Importer writes jobs with their history (see importer.go).
	Importer

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// Producer writes new jobs.
type Producer interface {
	// Enqueue writes new jobs atomically. A job whose unique key is held is
	// not an error: its item reports Duplicate with the holder's id.
	// Validation always covers the whole batch before anything is written;
	// on Redis Cluster, where queues live on different nodes, a crash can
	// still leave a batch spanning several queues written for some queues
	// only (each queue's part stays atomic).
	Enqueue(ctx context.Context, p EnqueueParams) (EnqueueResult, error)
}

// Runner is what a worker does with the jobs it runs: learn that work may
// be there, claim it, and report under the lease until the job's end.
type Runner interface {
	// Claim leases up to Max claimable jobs from the given queues. Each
	// claimed job is active, its Attempt incremented, and carries a fresh
	// LeaseToken (greater than any the job had) valid until LeaseExpiresAt.
	// A job whose deadline has passed is cancelled instead of handed out.
	Claim(ctx context.Context, p ClaimParams) (ClaimResult, error)

	// Heartbeat extends live leases; the result says, per lease, whether it
	// was lost (nothing is changed for a lost lease).
	Heartbeat(ctx context.Context, p HeartbeatParams) (HeartbeatResult, error)

	// Complete finishes jobs successfully, storing their results. An item
	// whose lease is not live fails with ErrLeaseLost and changes nothing.
	Complete(ctx context.Context, p CompleteParams) (BatchResult, error)

	// Fail ends attempts with an error: the job goes to retry at RetryAt
	// (pending at once if RetryAt is not after Now), or to failed when Final
	// is set or its attempts are used up.
	Fail(ctx context.Context, p FailParams) (BatchResult, error)

	// Release hands active jobs back to pending at once: the lease token
	// dies, the attempt is recorded as interrupted and not counted against
	// MaxAttempts. For graceful shutdown.
	Release(ctx context.Context, p ReleaseParams) (BatchResult, error)

	// Report records progress and log lines of active jobs under their
	// live leases (per item, as Complete does).
	Report(ctx context.Context, p ReportParams) (BatchResult, error)

	// Subscribe returns a subscription that receives a signal, soon after,
	// whenever a job may have become claimable in one of the queues. Signals
	// coalesce; a receiver must still claim to learn what is there, and must
	// not rely on signals alone (poll now and then). A store that cannot
	// signal returns ErrNotSupported, and its callers poll.
	Subscribe(ctx context.Context, p SubscribeParams) (*Subscription, error)
}

// Inspector reads jobs, queues and workers without changing them.
type Inspector interface {
	// Get returns a job by its id or by its JID, or ErrNotFound.
	Get(ctx context.Context, p GetParams) (*Job, error)

	// List pages through jobs in id order (enqueue order) with filters.
	List(ctx context.Context, p ListParams) (ListResult, error)

	// Stats counts jobs per queue and state, with each queue's settings and
	// oldest pending job, and the processed/failed counters per minute.
	Stats(ctx context.Context, p StatsParams) (Stats, error)

	// Workers lists the registry's entries not expired.
	Workers(ctx context.Context, p WorkersParams) ([]WorkerInfo, error)

	// WatchFinished returns a subscription signalled, soon after, whenever
	// one of the named jobs may have become final or been deleted. As with
	// Subscribe, a receiver must Get to learn what happened, and a store
	// that cannot signal returns ErrNotSupported.
	WatchFinished(ctx context.Context, p WatchParams) (*Subscription, error)
}

// Admin acts on jobs and queues by request (a person, the CLI, the API),
// outside any lease.
type Admin interface {
	// Cancel cancels a job. A scheduled, pending or retry job becomes
	// cancelled (reason "requested") at once; for an active job the request
	// is recorded (CancelRequested), reported by the next Heartbeat, and the
	// job ends cancelled whatever its attempt then reports. A final job
	// gives a *StateError.
	Cancel(ctx context.Context, p CancelParams) (*Job, error)

	// Retry sends a failed or cancelled job back to pending (see
	// RetryParams); RunNow makes a scheduled or retry job pending at once.
	// Other states give a *StateError.
	Retry(ctx context.Context, p RetryParams) (*Job, error)
	RunNow(ctx context.Context, p RunNowParams) (*Job, error)

	// RetryQueue retries up to Limit failed (or cancelled) jobs of a queue
	// as Retry does; Purge deletes up to Limit jobs of a queue in one state
	// (never active). Callers repeat while Count == Limit.
	RetryQueue(ctx context.Context, p RetryQueueParams) (CountResult, error)
	Purge(ctx context.Context, p PurgeParams) (CountResult, error)

	// Delete removes a job that is not active (ErrJobActive otherwise). A
	// unique key with a UniqueFor period keeps holding until that period ends.
	Delete(ctx context.Context, p DeleteParams) error

	// UpdateQueue changes a queue's settings (pause, retention overrides)
	// and returns them. A queue needs no creation; settings persist.
	UpdateQueue(ctx context.Context, p UpdateQueueParams) (QueueSettings, error)

	// CommandWorker records a command (quiet, stop) on a worker's registry
	// entry, which the worker's next RegisterWorker returns to it, and
	// returns the entry as Workers would show it. An id without an entry
	// not expired at Now gives ErrWorkerNotFound. See WorkerCommand.
	CommandWorker(ctx context.Context, p CommandWorkerParams) (WorkerInfo, error)
}

// Maintainer holds the steps that keep time moving in a store: each is
// safe to repeat, and to run from several processes at once.
type Maintainer interface {
	// Promote moves scheduled and retry jobs whose run-at has come to
	// pending, and cancels (reason "deadline") waiting jobs whose deadline
	// has passed.
	Promote(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error)

	// RecoverLeases ends expired leases: the attempt is recorded as
	// lease_expired and the job goes back to pending, or to failed when its
	// attempts are used up.
	RecoverLeases(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error)

	// ApplyRetention deletes final jobs whose retention has run out, and
	// forgets unique keys whose UniqueFor period has ended.
	ApplyRetention(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error)
}

// Registry is a worker process's own entry in the store's registry (which
// Inspector.Workers lists).
type Registry interface {
	// RegisterWorker records or refreshes a worker process's entry and
	// returns the command recorded on it (see WorkerCommand);
	// DeregisterWorker removes it.
	RegisterWorker(ctx context.Context, p RegisterWorkerParams) (RegisterWorkerResult, error)
	DeregisterWorker(ctx context.Context, p DeregisterWorkerParams) error
}

// ClaimMode chooses how Claim orders its queues.
type ClaimMode string

// Claim modes.
const (
	// ClaimStrict drains queues in the order given: a later queue is served
	// only when every earlier one has nothing claimable.
	ClaimStrict ClaimMode = "strict"
	// ClaimWeighted picks the queue order for each claim at random, each
	// queue weighted by Weights (default 1); a queue with nothing claimable
	// is skipped.
	ClaimWeighted ClaimMode = "weighted"
)

// ClaimParams asks for up to Max jobs.
type ClaimParams struct {
	Queues  []string
	Mode    ClaimMode // default ClaimStrict
	Weights map[string]int
	Max     int
	// MaxBytes bounds the payload bytes of the claimed jobs (0 or less:
	// no bound); the first job is taken whatever its size (see "Claim
	// budget" in the package doc).
	MaxBytes int
	// Types, when not empty, limits the claim to jobs of these types (at
	// most MaxClaimTypes; see "Claim by type" in the package doc).
	Types    []string
	Lease    time.Duration
	WorkerID string
	Now      time.Time
}

// MaxClaimTypes is how many types one claim may filter by.
const MaxClaimTypes = 100

// ClaimTypeScan is how many jobs of other types a claim filtered by type
// may skip in each queue before it gives up on that queue.
const ClaimTypeScan = 1000

// ClaimResult holds the claimed jobs, highest priority first, FIFO within a
// priority; each is active and carries its lease.
type ClaimResult struct {
	Jobs []*Job
	// Truncated says the claim stopped early because of a byte bound
	// (MaxBytes, or the answer bound of a remote server): claimable jobs
	// were left behind, and claiming again may get them.
	Truncated bool
}

// Lease names one claim on one job.
type Lease struct {
	JobID string
	Token int64
}

// HeartbeatParams extends Leases to Now+Extend.
type HeartbeatParams struct {
	Leases []Lease
	Extend time.Duration
	Now    time.Time
}

// LeaseStatus is the heartbeat's answer for one lease.
type LeaseStatus struct {
	// Lost is true when the lease is no longer live; the worker must stop.
	Lost bool
	// CancelRequested is true when someone asked to cancel the job.
	CancelRequested bool
	// ExpiresAt is the extended expiry of a live lease.
	ExpiresAt time.Time
}

// HeartbeatResult has one LeaseStatus per lease, in order.
type HeartbeatResult struct {
	Leases []LeaseStatus
}

// CompleteItem finishes one job.
type CompleteItem struct {
	Lease  Lease
	Result []byte
}

// CompleteParams finishes many jobs; each item stands alone.
type CompleteParams struct {
	Items []CompleteItem
	Now   time.Time
}

// FailItem ends one attempt with an error. Message and Stack are text
// (ValidText); the Worker makes a handler's error text with TextOf.
type FailItem struct {
	Lease   Lease
	Message string
	Stack   string
	// RetryAt is when to try again. Ignored when Final.
	RetryAt time.Time
	// Final skips any remaining attempts: the job goes to failed.
	Final bool
	// Cancel ends the job cancelled (reason "handler"), the attempt
	// recorded as AttemptCancelled with Message. It wins over Final.
	Cancel bool
}

// FailParams fails many attempts; each item stands alone.
type FailParams struct {
	Items []FailItem
	Now   time.Time
}

// ReleaseParams hands jobs back; each item stands alone.
type ReleaseParams struct {
	Leases []Lease
	Now    time.Time
}

// BatchResult has one error per item, in order: nil, ErrLeaseLost or
// ErrNotFound. An error returned beside it means no item was applied.
type BatchResult struct {
	Errors []error
}

// GetParams names a job: by ID, or by JID (NewJob.JID); exactly one is set.
type GetParams struct {
	ID  string
	JID string
}

// DeleteParams names a job to delete.
type DeleteParams struct {
	ID  string
	Now time.Time
}

// MaintenanceParams drives one maintenance step at Now over at most Limit
// jobs (0 means the backend's own bound); callers repeat while a step
// reports Limit jobs.
type MaintenanceParams struct {
	Now   time.Time
	Limit int
}

// MaintenanceResult counts what one step did.
type MaintenanceResult struct {
	// Moved counts jobs promoted, recovered or deleted.
	Moved int
	// Failed counts recovered jobs that went to failed, and Cancelled jobs
	// discarded by their deadline.
	Failed    int
	Cancelled int
}

// SubscribeParams names the queues to hear about.
type SubscribeParams struct {
	Queues []string
}

// Subscription delivers wake-up signals on C until Close. A backend may
// close C when it can no longer deliver signals (its connection is gone
// for good); a caller then subscribes again, as the Worker does with
// backoff, and polls meanwhile.
type Subscription struct {
	C     <-chan struct{}
	once  sync.Once
	close func()
}

// NewSubscription wraps a signal channel and the function that stops it.
func NewSubscription(c <-chan struct{}, close func()) *Subscription {
	return &Subscription{C: c, close: close}
}

// Close stops the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if s.close != nil {
			s.close()
		}
	})
}
