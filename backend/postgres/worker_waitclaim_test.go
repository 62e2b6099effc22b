package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// An idle worker's job is claimed in the commit of its enqueue: it is
// active the moment Enqueue returns, before any wake-up could have made
// the worker claim it (its handler holds it active until the test has
// looked).
func TestWorkerIdleJobClaimedInEnqueueCommit(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{})
	started := make(chan string, 1)
	finish := make(chan struct{})
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Queues: map[string]int{"q": 2},
		Handler: kyu.HandlerFunc(func(_ context.Context, j *kyu.Job) error {
			started <- j.ID
			<-finish
			return nil
		}),
		PollInterval:  time.Hour,
		ShutdownGrace: kyu.NoShutdownGrace,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	c := kyu.NewClient(s, kyu.ClientConfig{})
	for i := range 5 {
		awaitWaiting(t, s, 1)
		res, err := c.Enqueue(t.Context(), "t", nil, kyu.EnqueueOptions{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := rowVersion(t, s, res.ID); st != "active" {
			t.Fatalf("job %d is %s when Enqueue returns; want active", i, st)
		}
		select {
		case id := <-started:
			if id != res.ID {
				t.Fatalf("ran %s; want %s", id, res.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("job %d did not start", i)
		}
		finish <- struct{}{}
		deadline := time.Now().Add(30 * time.Second)
		for st, _ := rowVersion(t, s, res.ID); st != "completed"; st, _ = rowVersion(t, s, res.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s; want completed", i, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
