// Package kyutest helps test code that uses kyu, in the user's own tests:
//
//   - Run runs a handler on one job, through a real kyu.Worker on an
//     in-memory store, and returns what came of the attempt: the error the
//     handler returned, the job's state after it, and the result, progress
//     and log lines the handler reported (Job.SetResult, kyu.Progress,
//     kyu.Log), just as a worker in production records them.
//   - RequireEnqueued and RequireNotEnqueued assert that the code under
//     test enqueued (or did not enqueue) a job of a type, in a queue, with
//     a payload a predicate accepts, on any store.
//   - Drain runs a worker on a store until its queues have nothing left to
//     do, waiting on the store's signals rather than sleeping.
//
// The in-memory store of backend/memory is the natural store for such
// tests: nothing to start, nothing to clean up, and its wake-up signals
// make workers on it start each job at once.
package kyutest
