package pebble

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// TestDecodeWithNameCache decodes a record with and without a name cache:
// the same job, and with the cache no allocation for its type, queue and
// worker id once they are cached. It is not parallel: AllocsPerRun counts
// every goroutine's allocations.
func TestDecodeWithNameCache(t *testing.T) {
	j := &backend.Job{Type: "mail.send", Queue: "emails", WorkerID: "host-42-deadbeef", State: backend.StateActive,
		Attempt: 1, MaxAttempts: 3, RunAt: t0, CreatedAt: t0, StartedAt: t0, LeaseToken: 1, LeaseExpiresAt: t0.Add(time.Minute)}
	rec := encodeJob(nil, j, side{payload: true})
	var names nameCache
	plain, _, err := decodeJob(rec)
	if err != nil {
		t.Fatal(err)
	}
	cached, _, err := decodeJobNames(rec, &names)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain, cached) || cached.Type != j.Type || cached.Queue != j.Queue || cached.WorkerID != j.WorkerID {
		t.Fatalf("decoded with the cache %+v; want %+v", cached, plain)
	}
	without := testing.AllocsPerRun(100, func() { _, _, _ = decodeJob(rec) })
	with := testing.AllocsPerRun(100, func() { _, _, _ = decodeJobNames(rec, &names) })
	if with != without-3 {
		t.Fatalf("decoding allocates %v times with the name cache, %v without; want 3 fewer", with, without)
	}
}

// TestNameCacheStartsAfresh fills a name cache past its bound: it stays
// bounded and keeps answering with the right names.
func TestNameCacheStartsAfresh(t *testing.T) {
	t.Parallel()
	var c nameCache
	for i := range 3 * maxCachedNames {
		name := "worker-" + strconv.Itoa(i)
		if got := c.get([]byte(name)); got != name {
			t.Fatalf("get(%q) = %q", name, got)
		}
		if len(c.m) > maxCachedNames {
			t.Fatalf("cache holds %d names; want at most %d", len(c.m), maxCachedNames)
		}
	}
	if got := c.get(nil); got != "" {
		t.Fatalf("get(nil) = %q", got)
	}
}
