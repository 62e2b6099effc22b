// Package kyu is a background-job system: a priority job queue with durable
// storage, and workers with a careful lifecycle.
//
// A Client enqueues jobs into a backend.Backend (the embedded Pebble store,
// Redis, PostgreSQL or a kyu server over HTTP); a Worker claims them
// under leases, runs the Handler registered for their type, and records the
// outcome. Every claim is a lease with a heartbeat and a fencing token: a
// worker that crashes or hangs loses its lease, the job is recovered and
// run again, and the stale worker can no longer complete it.
//
//	store, _ := pebble.Open("kyu-data", pebble.Options{})
//	client := kyu.NewClient(store, kyu.ClientConfig{})
//	client.Enqueue(ctx, "email.send", payload, kyu.EnqueueOptions{Queue: "mail"})
//
//	mux := kyu.NewMux()
//	mux.HandleFunc("email.send", func(ctx context.Context, job *kyu.Job) error { ... })
//	worker, _ := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{"mail": 10}})
//	worker.Run(ctx)
//
// # Enqueueing
//
// Enqueue and EnqueueJSON add one job, EnqueueMany and EnqueueManyJSON
// several atomically; EnqueueTx, EnqueueJSONTx and EnqueueManyTx do the
// same inside the caller's database transaction (PostgreSQL: a pgx.Tx or
// a *sql.Tx), so the jobs exist if and only if it commits. Every one of
// them reports a job whose unique key is held the same way: not an error,
// but a result with Duplicate set and the holder's id.
//
// # Workers
//
// A Worker serves each queue in WorkerConfig.Queues with its own
// concurrency, and the queues of WorkerConfig.Pool with one concurrency
// they share, in strict or weighted order, each queue optionally capped
// (see PoolConfig). It claims jobs in batches as slots free up, waking on the
// backend's signals and polling as a fallback, and, if asked to
// (WorkerConfig.ClaimAhead), claims ahead while its handlers are busy with
// short jobs so that the next claim's commit overlaps their work. It runs
// each job in its own goroutine with a context that ends at the job's timeout (counted
// from the handler's start), when its lease is lost or about to expire
// unrenewed (the cause is then ErrLeaseLost), or at a forced shutdown. One heartbeater extends all leases; one completer
// records the outcomes of many jobs in one backend call. A handler that
// ignores its context for a Lease past its timeout is abandoned: its
// attempt fails and is retried, its slot is freed, and its goroutine is
// left to itself (and logged).
//
// A handler's error fails the attempt and the job is retried after its
// backoff (ExponentialBackoff by default, FixedBackoff, or any BackoffFunc,
// per type if wanted). RetryAfter chooses the delay for one failure;
// Permanent fails the job at once. A panic, or a call to runtime.Goexit, is
// recovered into a failure with its stack. A Mux dispatches by job type; a type it does not know fails
// with ErrNoHandler and is retried, so a rolling deploy loses nothing.
//
// Run (or Shutdown) stops gracefully: claiming stops at once, running jobs
// get ShutdownGrace to finish, and the rest are cancelled and handed back to
// their queue at once.
//
// # Results, progress and cancelling
//
// A handler stores a result with Job.SetResult; Client.Wait blocks until a
// job is finished and returns it, woken by the store's signal, and
// Client.EnqueueAndWait does both for request/response work. Inside a
// handler, Progress, Log and Logf record progress and log lines with the
// handler's context; they are sent in batches and stored before the job's
// outcome. Client.Cancel cancels a waiting job at once, and a running one
// at its worker's next heartbeat: the handler's context ends with the cause
// ErrCancelled and the job ends cancelled whatever the handler returns. A
// handler ends its own job cancelled by returning Cancel(err).
//
// # Operating
//
// Client also offers what a dashboard or a CLI needs: Retry, RunNow,
// Delete, Purge and RetryFailed; PauseQueue, ResumeQueue and
// SetQueueRetention; List with filters and cursors; Stats; and Workers,
// the registry in which every Worker keeps an entry (host, pid, queues,
// the jobs it runs, its counters) while it runs. WorkerConfig.Periodic
// enqueues jobs on a cron schedule or an interval, each tick exactly once
// however many workers list it.
package kyu
