package kyu

import (
	"testing"
	"time"
)

// A fetcher woken by the release of held slots finds none still held: it
// claims only with no slot held (claimSize), and a release that woke it
// while others were held, with no wake-up after the last, left it waiting
// for its next poll (a drain stalled for most of a second at a time).
func TestFinishWakesFetcherAfterLastHeldSlot(t *testing.T) {
	const n = 20000
	w := &Worker{}
	f := &fetcher{w: w, slots: newSlots(n, 0)}
	q := &poolQueue{name: "q"}
	runs := make([]*jobRun, n)
	for i := range runs {
		f.slots.acquire(q)
		f.slots.held.Add(1) // the handler returned; the slot stays taken
		runs[i] = &jobRun{f: f, q: q, hold: slotHeld, tracked: -1}
	}
	// The fetcher's side: woken, it looks at what is still held.
	seen := make(chan int32, 1)
	go func() {
		<-f.slots.freed
		seen <- f.slots.held.Load()
	}()
	w.finish(runs)
	var held int32
	select {
	case held = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetcher was not woken")
	}
	if held != 0 && len(f.slots.freed) == 0 {
		t.Fatalf("the fetcher was woken with %d slots still held, and no wake-up followed", held)
	}
	if got := f.slots.taken.Load(); got != 0 {
		t.Fatalf("slots taken after finish = %d; want 0", got)
	}
}
