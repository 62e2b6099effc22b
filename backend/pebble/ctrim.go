package pebble

import (
	"sync"
	"time"
)

// cTrimmer gives back to the system the memory C's allocator keeps after
// Pebble freed it. In a build with cgo, Pebble allocates its block cache
// block by block with malloc; when a compaction deletes tables, their
// blocks leave the cache and are freed, but glibc keeps freed chunks in
// its arenas (it returns only the top of a heap), so after a large drain
// the process held some 70 MiB it no longer used, as much as the block
// cache had held. Once tables were deleted, the trimmer calls
// malloc_trim(0), which returns the free pages of every arena, at most
// once per trimInterval. Elsewhere (no cgo, or another C library) it does
// nothing: without cgo Pebble allocates from the Go heap, whose collector
// returns memory itself.
type cTrimmer struct {
	mu      sync.Mutex
	last    time.Time
	timer   *time.Timer
	stopped bool
}

// trimInterval is the least time between two trims: one walks every free
// chunk of the C heap (a millisecond or so for a hundred MiB), and pages
// given back fault in again when they are reused.
const trimInterval = time.Second

// note asks for a trim: at once when the last was trimInterval ago or
// more, otherwise when it will have been.
func (t *cTrimmer) note() {
	if !canTrimC {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil || t.stopped {
		return
	}
	t.timer = time.AfterFunc(max(time.Until(t.last.Add(trimInterval)), 0), t.run)
}

func (t *cTrimmer) run() {
	t.mu.Lock()
	t.timer = nil
	t.last = time.Now()
	stopped := t.stopped
	t.mu.Unlock()
	if !stopped {
		trimC()
	}
}

// stop cancels a trim to come and trims once more, when Pebble has
// freed its memory at Close.
func (t *cTrimmer) stop() {
	if !canTrimC {
		return
	}
	t.mu.Lock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.mu.Unlock()
	trimC()
}
