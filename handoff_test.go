package kyu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Jobs queued to the handler goroutines all start while every handler
// blocks: none waits behind a running one. Run twice, so that the second
// batch goes to goroutines from the first, which are reused (a put while
// a goroutine is between jobs may still start one more).
func TestHandoffStartsEveryJobAtOnce(t *testing.T) {
	const n = 50
	h := newHandoff()
	started := make(chan *jobRun)
	var goroutines atomic.Int32
	var wg sync.WaitGroup
	release := make(chan struct{}) // one value lets one handler return
	var loop func()
	loop = func() {
		defer wg.Done()
		coming := true
		for {
			run, start := h.take(coming)
			if run == nil {
				return
			}
			if start {
				spawn(&wg, &goroutines, loop)
			}
			started <- run
			<-release
			coming = false
		}
	}
	for round := range 2 {
		for range n {
			if h.put(&jobRun{}) {
				spawn(&wg, &goroutines, loop)
			}
		}
		seen := map[*jobRun]bool{}
		deadline := time.After(10 * time.Second)
		for len(seen) < n {
			select {
			case run := <-started:
				seen[run] = true
			case <-deadline:
				t.Fatalf("round %d: %d of %d jobs started while the others ran", round, len(seen), n)
			}
		}
		for range n {
			release <- struct{}{}
		}
	}
	h.close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler goroutines did not end after close")
	}
	if g := goroutines.Load(); g < n || g >= 2*n {
		t.Errorf("%d goroutines ran two rounds of %d jobs at a time, want from %d, reused", g, n, n)
	}
}

func spawn(wg *sync.WaitGroup, count *atomic.Int32, f func()) {
	wg.Add(1)
	count.Add(1)
	go f()
}

// Jobs queued before close still run, and every goroutine ends once they
// have.
func TestHandoffCloseRunsQueuedJobs(t *testing.T) {
	h := newHandoff()
	var ran atomic.Int32
	var wg sync.WaitGroup
	var loop func()
	loop = func() {
		defer wg.Done()
		coming := true
		for {
			run, start := h.take(coming)
			if run == nil {
				return
			}
			if start {
				wg.Add(1)
				go loop()
			}
			ran.Add(1)
			coming = false
		}
	}
	for range 3 {
		if h.put(&jobRun{}) {
			wg.Add(1)
			go loop()
		}
	}
	// Let the goroutines run out of jobs and wait, then queue more and
	// close at once.
	for deadline := time.Now().Add(10 * time.Second); ran.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 jobs ran", ran.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		if h.put(&jobRun{}) {
			wg.Add(1)
			go loop()
		}
	}
	h.close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler goroutines did not end after close")
	}
	if n := ran.Load(); n != 8 {
		t.Errorf("%d jobs ran, want 8", n)
	}
}
