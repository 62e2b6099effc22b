package pebble

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// memoryBar is the most resident memory TestMemoryMillion accepts at any of
// its three moments.
const memoryBar = 250 << 20

// TestMemoryMillion measures the process's resident memory around a
// million pending jobs of 100 bytes: after enqueuing them in batches of
// 1,000 and a collection, after closing and reopening the store and a
// collection, and after draining them all (claims of 100 completed in one
// call, default retention, so the completed jobs stay) and a collection.
// At each moment it logs VmRSS, the Go heap and Pebble's own memory, and
// fails above memoryBar. It never returns memory to the system itself
// (debug.FreeOSMemory): what it reports is what a user would see.
//
// It runs only with KYU_TEST_MEMORY=1 (KYU_TEST_MEMORY_JOBS changes the
// count; KYU_TEST_MEMORY_CACHE_MIB and KYU_TEST_MEMORY_MEMTABLE_MIB set
// Options.CacheSize and MemTableSize; KYU_TEST_MEMORY_PROFILE=dir writes
// a heap profile at each moment into dir), and should run outside the race detector, which inflates memory:
//
//	KYU_TEST_MEMORY=1 go test -count=1 -run TestMemoryMillion -v ./backend/pebble/
func TestMemoryMillion(t *testing.T) {
	if os.Getenv("KYU_TEST_MEMORY") != "1" {
		t.Skip("set KYU_TEST_MEMORY=1 to run")
	}
	n := 1_000_000
	if v := os.Getenv("KYU_TEST_MEMORY_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("KYU_TEST_MEMORY_JOBS: %v", err)
		}
	}
	const batch = 1000
	payload := bytes.Repeat([]byte("x"), 100)
	ctx := context.Background()
	dir := t.TempDir()
	var rss [3]float64

	var opts Options
	for name, set := range map[string]func(int){
		"KYU_TEST_MEMORY_CACHE_MIB":    func(v int) { opts.CacheSize = int64(v) << 20 },
		"KYU_TEST_MEMORY_MEMTABLE_MIB": func(v int) { opts.MemTableSize = uint64(v) << 20 },
	} {
		if v := os.Getenv(name); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			set(i)
		}
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	jobs := make([]backend.NewJob, batch)
	for done := 0; done < n; done += batch {
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Payload: payload}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs[:min(batch, n-done)], Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("enqueued %d jobs in %.1f s", n, time.Since(start).Seconds())
	runtime.GC()
	rss[0] = logMemory(t, "after enqueue", s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	t.Logf("reopened in %.1f s", time.Since(start).Seconds())
	runtime.GC()
	rss[1] = logMemory(t, "after reopen", s)

	start = time.Now()
	if got := drainAll(t, s); got != n {
		t.Fatalf("drained %d of %d jobs", got, n)
	}
	t.Logf("drained in %.1f s", time.Since(start).Seconds())
	runtime.GC()
	rss[2] = logMemory(t, "after drain", s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, moment := range []string{"after enqueue", "after reopen", "after drain"} {
		if rss[i] > memoryBar {
			t.Errorf("%s: VmRSS %.1f MiB, above %d MiB", moment, rss[i]/(1<<20), memoryBar>>20)
		}
	}
}

// drainAll claims and completes every pending job of the default queue
// with 4 workers, 100 jobs per claim, and returns how many it completed.
func drainAll(t *testing.T, s *Store) int {
	return drainQueue(t, s, 4, 100, 0)
}

// logMemory logs the process's resident memory, the Go heap and Pebble's
// memory, and returns VmRSS in bytes.
func logMemory(t *testing.T, moment string, s *Store) float64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	field := func(name string) float64 {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				return kb * 1024
			}
		}
		return 0
	}
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/total:bytes"},
	}
	metrics.Read(samples)
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	u := func(i int) float64 { return float64(samples[i].Value.Uint64()) }
	rss := field("VmRSS")
	if dir := os.Getenv("KYU_TEST_MEMORY_PROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(moment, " ", "-")+".heap"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	t.Logf("%s: VmRSS %s (anon %s, file %s), VmHWM %s", moment,
		mib(rss), mib(field("RssAnon")), mib(field("RssFile")), mib(field("VmHWM")))
	t.Logf("%s: Go heap objects %s, unused in spans %s, free %s, released %s; Go runtime mapped less released %s", moment,
		mib(u(0)), mib(u(1)), mib(u(2)), mib(u(3)), mib(u(4)-u(3)))
	m := s.db.Metrics()
	t.Logf("%s: Pebble block cache %s (%d blocks), memtables %s (%d, zombie %s), file cache %d tables, %s", moment,
		mib(float64(m.BlockCache.Size)), m.BlockCache.Count, mib(float64(m.MemTable.Size)), m.MemTable.Count,
		mib(float64(m.MemTable.ZombieSize)), m.FileCache.TableCount, mib(float64(m.FileCache.Size)))
	for _, line := range strings.Split(m.String(), "\n") {
		if strings.HasPrefix(line, "Cgo memory usage") {
			t.Logf("%s: Pebble %s", moment, line)
		}
	}
	// What neither the Go runtime nor Pebble accounts for: mostly memory
	// C's allocator keeps after Pebble freed it (the block cache's blocks
	// are malloc'd one by one in a build with cgo).
	t.Logf("%s: anonymous resident memory beyond the Go runtime's and Pebble's: %s", moment,
		mib(field("RssAnon")-(u(4)-u(3))-float64(cgoInUse(m))))
	return rss
}

// cgoInUse is the memory Pebble allocated outside the Go heap and has not
// freed (block cache, memtables), as its metrics report it.
func cgoInUse(m *cpebble.Metrics) uint64 {
	return uint64(m.BlockCache.Size) + m.MemTable.Size + m.MemTable.ZombieSize
}

// TestDrainHeap bounds the Go heap that jobs drained and kept for their
// retention leave live in the store's own structures: their ids in the
// completed set (16 bytes each, and the chunks' slack), and no more,
// beside a fixed allowance (maps sized for the writes in flight). A heap
// of their deletion times took 24 bytes more a job (about 50 MB after a
// drain of a million jobs, TestMemoryMillion, which the Go runtime then
// kept about twice over). It counts the live bytes that kyu's code
// allocated, from a heap profile of every allocation, leaving out
// Pebble's (in a race build Pebble puts its memtables and block cache on
// the Go heap, half the time).
func TestDrainHeap(t *testing.T) {
	const n, perJob, fixed = 20_000, 24, 512 << 10
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	s := openStore(t, t.TempDir(), Options{})
	ctx := context.Background()
	jobs := make([]backend.NewJob, 1000)
	for done := 0; done < n; done += len(jobs) {
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t"}
		}
		if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if got := drainQueue(t, s, 2, 100, 0); got != n {
		t.Fatalf("drained %d of %d jobs", got, n)
	}
	live := storeHeap()
	t.Logf("live heap the store allocated: %d bytes after draining %d jobs", live, n)
	if live > n*perJob+fixed {
		t.Errorf("live heap the store allocated: %d bytes after draining %d jobs; want at most %d bytes a job and %d KiB",
			live, n, perJob, fixed>>10)
	}
}

// storeHeap is the live heap, after collections, allocated from this
// package's code and not from within Pebble, as the heap profile records
// it (every allocation once runtime.MemProfileRate is 1).
func storeHeap() int64 {
	// The profile is as of the last completed cycle but one.
	for range 3 {
		runtime.GC()
	}
	var recs []runtime.MemProfileRecord
	for {
		n, ok := runtime.MemProfile(recs, false)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.MemProfileRecord, n+100)
	}
	const self, engine = "github.com/kyuhq/kyu/backend/pebble.", "github.com/cockroachdb/"
	var live int64
	for _, r := range recs {
		frames := runtime.CallersFrames(r.Stack())
		var ours, theirs bool
		for {
			f, more := frames.Next()
			ours = ours || strings.HasPrefix(f.Function, self)
			theirs = theirs || strings.HasPrefix(f.Function, engine)
			if !more {
				break
			}
		}
		if ours && !theirs {
			live += r.InUseBytes()
		}
	}
	return live
}
