package remote_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server"
)

// wakeupWait bounds the waits of the wake-up tests; a healthy run takes far
// less.
const wakeupWait = 20 * time.Second

// subscribeCounter is a backend that counts its Subscribe calls that failed
// and those that succeeded.
type subscribeCounter struct {
	backend.Backend
	failed, succeeded atomic.Int32
}

func (c *subscribeCounter) Subscribe(ctx context.Context, p backend.SubscribeParams) (*backend.Subscription, error) {
	sub, err := c.Backend.Subscribe(ctx, p)
	if err != nil {
		c.failed.Add(1)
	} else {
		c.succeeded.Add(1)
	}
	return sub, err
}

// freeAddr returns a loopback address that no one listened on a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startHourlyWorker starts a worker over b that polls once an hour, so that
// only wake-ups get a new job started soon, and that sends the id of each
// job it runs on ran. The test shuts it down with stop (or else cleanup
// does).
func startHourlyWorker(t *testing.T, b backend.Backend) (ran <-chan string, stop func()) {
	t.Helper()
	c := make(chan string, 1)
	w, err := kyu.NewWorker(b, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(_ context.Context, job *kyu.Job) error {
			c <- job.ID
			return nil
		}),
		PollInterval:       time.Hour,
		DisableMaintenance: true, // the server runs maintenance
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Errorf("worker Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

// waitFor polls cond until it holds, failing the test after wakeupWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wakeupWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", wakeupWait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// enqueueAndRun enqueues a job through a backend of its own for url and
// waits for the worker to run it.
func enqueueAndRun(t *testing.T, url string, ran <-chan string) {
	t.Helper()
	client := kyu.NewClient(openRemote(t, url), kyu.ClientConfig{})
	res, err := client.Enqueue(t.Context(), "wake", nil, kyu.EnqueueOptions{})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	select {
	case id := <-ran:
		if id != res.ID {
			t.Fatalf("ran %s, want %s", id, res.ID)
		}
	case <-time.After(wakeupWait):
		t.Fatalf("the job enqueued did not run within %s (no wake-up reached the worker, which polls once an hour)", wakeupWait)
	}
}

// A worker started before its server has no wake-up stream at first; it
// subscribes again until the server is up, and then starts a new job at
// once.
func TestWorkerStartedBeforeServerGetsWakeups(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	url := "http://" + addr
	b := &subscribeCounter{Backend: openRemote(t, url)}
	ran, stop := startHourlyWorker(t, b)
	waitFor(t, "the worker's Subscribe to fail while no server listens", func() bool { return b.failed.Load() > 0 })
	newServer(t, func(c *server.Config) { c.Addr = addr })
	enqueueAndRun(t, url, ran)
	stop()
}

// A worker whose first wake-up stream is refused (503: every long-poll
// slot of the server is taken) subscribes again until a slot frees up.
func TestWorkerGetsWakeupsOnceSlotFrees(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(c *server.Config) { c.MaxLongPolls = 1 })
	url := "http://" + srv.Addr().String()

	// Take the only slot with a stream of our own.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/wakeups", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer remote-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("holding stream: HTTP %d, want 200", resp.StatusCode)
	}

	b := &subscribeCounter{Backend: openRemote(t, url)}
	ran, stop := startHourlyWorker(t, b)
	waitFor(t, "the worker's Subscribe to be refused while the slot is taken", func() bool { return b.failed.Load() > 0 })
	cancel()
	resp.Body.Close()
	enqueueAndRun(t, url, ran)
	stop()
}

// A worker whose server restarts gets its wake-up stream back from the new
// server, and starts a job enqueued there at once.
func TestWorkerGetsWakeupsAfterServerRestart(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	url := "http://" + addr
	first := newServer(t, func(c *server.Config) { c.Addr = addr })
	b := &subscribeCounter{Backend: openRemote(t, url)}
	ran, stop := startHourlyWorker(t, b)
	waitFor(t, "the worker to subscribe", func() bool { return b.succeeded.Load() > 0 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatalf("first server Shutdown: %v", err)
	}
	newServer(t, func(c *server.Config) { c.Addr = addr })
	enqueueAndRun(t, url, ran)
	stop()
}
