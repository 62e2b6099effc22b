package kyu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testHandlers runs handler goroutines on a handoff as handlerLoop does,
// each calling do with the jobs it takes.
type testHandlers struct {
	h          *handoff
	do         func(*jobRun)
	wg         sync.WaitGroup
	goroutines atomic.Int32
}

// put queues a job, starting a goroutine when the handoff asks for one.
func (th *testHandlers) put(run *jobRun) {
	if th.h.put([]handed{{run: run}}) {
		th.start()
	}
}

func (th *testHandlers) start() {
	th.wg.Add(1)
	th.goroutines.Add(1)
	go th.loop()
}

func (th *testHandlers) loop() {
	defer th.wg.Done()
	coming := true
	for {
		job, start := th.h.take(coming)
		run := job.run
		if run == nil {
			return
		}
		if start {
			th.start()
		}
		th.do(run)
		coming = false
	}
}

// closeAndWait closes the handoff and waits for every goroutine to end.
func (th *testHandlers) closeAndWait(t *testing.T) {
	t.Helper()
	th.h.close()
	done := make(chan struct{})
	go func() { th.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler goroutines did not end after close")
	}
}

// Jobs queued to the handler goroutines all start while every handler
// blocks: none waits behind a running one. Run twice, so that the second
// batch goes to goroutines from the first, which are reused (a put while
// a goroutine is between jobs may still start one more).
func TestHandoffStartsEveryJobAtOnce(t *testing.T) {
	const n = 50
	started := make(chan *jobRun)
	release := make(chan struct{}) // one value lets one handler return
	th := &testHandlers{h: newHandoff(), do: func(run *jobRun) {
		started <- run
		<-release
	}}
	for round := range 2 {
		for range n {
			th.put(&jobRun{})
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
	th.closeAndWait(t)
	if g := th.goroutines.Load(); g < n || g >= 2*n {
		t.Errorf("%d goroutines ran two rounds of %d jobs at a time, want from %d, reused", g, n, n)
	}
}

// Jobs queued before close still run, and every goroutine ends once they
// have.
func TestHandoffCloseRunsQueuedJobs(t *testing.T) {
	var ran atomic.Int32
	th := &testHandlers{h: newHandoff(), do: func(*jobRun) { ran.Add(1) }}
	for range 3 {
		th.put(&jobRun{})
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
		th.put(&jobRun{})
	}
	th.closeAndWait(t)
	if n := ran.Load(); n != 8 {
		t.Errorf("%d jobs ran, want 8", n)
	}
}
