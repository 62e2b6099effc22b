package kyu

import "sync"

// jobRun is the worker's side of a running job: what the handler reports
// back through the Job's methods.
type jobRun struct {
	mu     sync.Mutex
	result []byte
}

func (r *jobRun) setResult(b []byte) {
	r.mu.Lock()
	r.result = append([]byte(nil), b...)
	r.mu.Unlock()
}
