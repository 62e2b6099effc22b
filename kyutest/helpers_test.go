package kyutest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing the
// test, so a test can check that a helper fails when it should. Fatal
// ends the goroutine as testing does: call the helper through fails.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// fails runs fn with a recorder on a goroutine of its own and returns
// what it failed with, "" when it did not.
func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.failed, "\n")
}
