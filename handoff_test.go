package kyu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testHandlers runs handler goroutines on a handoff as handlerLoop does,
// each calling do with the jobs it takes; a goroutine whose do returns
// false ends, as one whose run was taken from it (the taker calls leave).
type testHandlers struct {
	h          *handoff
	do         func(*jobRun) bool
	wg         sync.WaitGroup
	goroutines atomic.Int32
	// left holds the jobs close took back.
	left []*jobRun
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
	coming, busy := true, false
	for {
		job, start := th.h.take(coming, busy)
		run := job.run
		if run == nil {
			return
		}
		if start {
			th.start()
		}
		if !th.do(run) {
			return
		}
		coming, busy = false, true
	}
}

// leave is what the taker of a run does for its goroutine.
func (th *testHandlers) leave() {
	if th.h.leave() {
		th.start()
	}
}

// closeAndWait closes the handoff and waits for every goroutine to end.
func (th *testHandlers) closeAndWait(t *testing.T) {
	t.Helper()
	th.left = th.h.close()
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
	th := &testHandlers{h: newHandoff(n), do: func(run *jobRun) bool {
		started <- run
		<-release
		return true
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

// Jobs queued at close are taken back, not run, and every goroutine
// ends.
func TestHandoffCloseTakesBackQueuedJobs(t *testing.T) {
	var ran atomic.Int32
	block := make(chan struct{})
	th := &testHandlers{h: newHandoff(2), do: func(*jobRun) bool {
		ran.Add(1)
		<-block
		return true
	}}
	for range 5 {
		th.put(&jobRun{})
	}
	for deadline := time.Now().Add(10 * time.Second); ran.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 jobs started", ran.Load())
		}
		time.Sleep(time.Millisecond)
	}
	left := th.h.close()
	close(block)
	th.closeAndWait(t)
	if n, l := ran.Load(), len(left); n != 2 || l != 3 {
		t.Errorf("%d jobs ran and %d were taken back, want 2 and 3", n, l)
	}
}

// At most limit jobs run at once, however many are queued (jobs claimed
// ahead wait); a handler that returns takes the next, and one whose run
// is taken from it (leave) has another goroutine take its place.
func TestHandoffRunsAtMostLimit(t *testing.T) {
	const limit, jobs = 3, 10
	started := make(chan *jobRun, jobs)
	// Each value lets one handler return; false ends its goroutine as
	// one whose run was taken from it.
	release := make(chan bool)
	th := &testHandlers{h: newHandoff(limit), do: func(run *jobRun) bool {
		started <- run
		return <-release
	}}
	for range jobs {
		th.put(&jobRun{})
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for range n {
			select {
			case <-started:
			case <-deadline:
				t.Fatalf("fewer than %d jobs started", n)
			}
		}
		// No more start than given room: the handoff holds them.
		select {
		case <-started:
			t.Fatalf("more than %d handlers run at once", limit)
		case <-time.After(20 * time.Millisecond):
		}
	}
	wait(limit)
	release <- true // one returns, and takes the next
	wait(1)
	release <- false // one is abandoned: another takes its place
	th.leave()
	wait(1)
	for range jobs - limit - 2 {
		release <- true
		wait(1)
	}
	for range limit {
		release <- true
	}
	th.closeAndWait(t)
	if len(th.left) != 0 {
		t.Errorf("%d jobs left queued", len(th.left))
	}
	if g := th.goroutines.Load(); g > limit+1 {
		t.Errorf("%d goroutines ran %d jobs %d at a time, want at most %d", g, jobs, limit, limit+1)
	}
}

// Jobs queued at close that free handlers would start are kept and run:
// only jobs beyond the free handlers (claimed ahead) are taken back, so
// a job claimed just before a fetcher stops (Quiet) still runs.
func TestHandoffCloseKeepsJobsForFreeHandlers(t *testing.T) {
	h := newHandoff(2)
	runs := []*jobRun{{}, {}, {}}
	h.put([]handed{{run: runs[0]}, {run: runs[1]}, {run: runs[2]}})
	left := h.close()
	if len(left) != 1 || left[0] != runs[2] {
		t.Fatalf("close took back %d jobs, want the one beyond the 2 free handlers", len(left))
	}
	for i, want := range runs[:2] {
		got, _ := h.take(i == 0, false)
		if got.run != want {
			t.Fatalf("take %d after close = %p, want the queued job %p", i, got.run, want)
		}
	}
}
