package kyu

import "context"

// Handler runs jobs. ProcessJob returns nil when the job succeeded; an error
// fails the attempt, and the job is retried after its backoff unless the
// error is Permanent or its attempts are used up. RetryAfter chooses the
// delay. The context ends at the job's timeout, when the worker loses the
// job's lease (cause ErrLeaseLost), when the job is cancelled (cause
// ErrCancelled), and at a forced shutdown; a handler should return soon
// after. The context also carries the job for Progress, Log and Logf.
//
// The worker reuses its handler goroutines from job to job, so a handler
// must undo what it sets on its goroutine (runtime.LockOSThread,
// pprof.SetGoroutineLabels) before it returns.
type Handler interface {
	ProcessJob(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// ProcessJob calls f(ctx, job).
func (f HandlerFunc) ProcessJob(ctx context.Context, job *Job) error { return f(ctx, job) }

// Middleware wraps a Handler in another, to add behaviour around every job
// (logging, metrics, tracing). The first middleware given to Mux.Use is the
// outermost.
type Middleware func(Handler) Handler
