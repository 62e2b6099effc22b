package kyu

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNoHandler is the error of an attempt whose job type has no handler in a
// Mux. The attempt fails and is retried with backoff, so that during a
// rolling deploy a job reaches a worker that knows its type.
var ErrNoHandler = errors.New("kyu: no handler for the job type")

// noHandlerError names the job type that has no handler.
type noHandlerError struct{ jobType string }

func (e *noHandlerError) Error() string   { return "no handler for type " + e.jobType }
func (e *noHandlerError) Is(t error) bool { return t == ErrNoHandler }

// Mux dispatches jobs to handlers by job type, in the manner of
// http.ServeMux. Register handlers before the worker starts; registering
// while jobs run is safe but a job already dispatched keeps its handler.
// The zero value is ready to use, like one from NewMux.
type Mux struct {
	mu         sync.RWMutex
	handlers   map[string]Handler
	middleware []Middleware
	// chain is the middleware-wrapped dispatcher, rebuilt by Use.
	chain Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	m := &Mux{handlers: make(map[string]Handler)}
	m.chain = HandlerFunc(m.dispatch)
	return m
}

// Handle registers h for jobs of type jobType. It panics on an empty type, a
// nil handler or a type registered twice, as these are programming errors.
func (m *Mux) Handle(jobType string, h Handler) {
	if jobType == "" {
		panic("kyu: Mux.Handle: empty job type")
	}
	if h == nil {
		panic("kyu: Mux.Handle: nil handler for type " + jobType)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = make(map[string]Handler)
	}
	if _, dup := m.handlers[jobType]; dup {
		panic(fmt.Sprintf("kyu: Mux.Handle: type %q registered twice", jobType))
	}
	m.handlers[jobType] = h
}

// HandleFunc registers f for jobs of type jobType.
func (m *Mux) HandleFunc(jobType string, f func(ctx context.Context, job *Job) error) {
	m.Handle(jobType, HandlerFunc(f))
}

// Use appends middleware that wraps every job the Mux runs, including jobs
// of unknown type. The first middleware given is the outermost.
func (m *Mux) Use(mw ...Middleware) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.middleware = append(m.middleware, mw...)
	var h Handler = HandlerFunc(m.dispatch)
	for i := len(m.middleware) - 1; i >= 0; i-- {
		h = m.middleware[i](h)
	}
	m.chain = h
}

// Handler returns the handler registered for jobType, or nil.
func (m *Mux) Handler(jobType string) Handler {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.handlers[jobType]
}

// Types lists the registered job types in no particular order.
func (m *Mux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	types := make([]string, 0, len(m.handlers))
	for t := range m.handlers {
		types = append(types, t)
	}
	return types
}

// ProcessJob runs the middleware chain and the handler for job.Type; a type
// with no handler returns an error matching ErrNoHandler.
func (m *Mux) ProcessJob(ctx context.Context, job *Job) error {
	m.mu.RLock()
	h := m.chain
	m.mu.RUnlock()
	if h == nil { // a zero Mux without middleware
		return m.dispatch(ctx, job)
	}
	return h.ProcessJob(ctx, job)
}

func (m *Mux) dispatch(ctx context.Context, job *Job) error {
	h := m.Handler(job.Type)
	if h == nil {
		return &noHandlerError{jobType: job.Type}
	}
	return h.ProcessJob(ctx, job)
}
