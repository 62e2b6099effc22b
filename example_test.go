package kyu_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
)

// openExampleStore opens a store in a fresh temporary directory; cleanup
// closes it and removes the directory.
func openExampleStore() (store *pebble.Store, cleanup func()) {
	dir, err := os.MkdirTemp("", "kyu-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err = pebble.Open(dir, pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return store, func() {
		store.Close()
		os.RemoveAll(dir)
	}
}

// runOnce starts a worker with h, waits until h has seen one job, and shuts
// the worker down; Shutdown returns once the job's outcome is recorded.
func runOnce(store *pebble.Store, h kyu.HandlerFunc) {
	ctx := context.Background()
	seen := make(chan struct{}, 1)
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			defer func() { seen <- struct{}{} }()
			return h(ctx, job)
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-seen
	if err := worker.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Enqueue() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.EnqueueJSON(ctx, "email.send",
		map[string]string{"to": "ada@example.com"},
		kyu.EnqueueOptions{Queue: "mail", Priority: 10, MaxAttempts: 5})
	if err != nil {
		log.Fatal(err)
	}

	job, err := client.Get(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Type, job.Queue, job.State, job.Priority, job.MaxAttempts)
	fmt.Println(string(job.Payload))
	// Output:
	// email.send mail pending 10 5
	// {"to":"ada@example.com"}
}

func ExampleClient_EnqueueManyJSON() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	type email struct {
		To string `json:"to"`
	}
	client := kyu.NewClient(store, kyu.ClientConfig{})
	// All or nothing: both jobs are written, or neither.
	res, err := client.EnqueueManyJSON(ctx, []kyu.JSONJobSpec{
		{Type: "email.send", Payload: email{To: "ada@example.com"}},
		{Type: "email.send", Payload: email{To: "bob@example.com"}, EnqueueOptions: kyu.EnqueueOptions{Delay: time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		job, err := client.Get(ctx, r.ID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(job.State, string(job.Payload))
	}
	// Output:
	// pending {"to":"ada@example.com"}
	// scheduled {"to":"bob@example.com"}
}

func ExampleWorker() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.EnqueueJSON(ctx, "email.send", map[string]string{"to": "ada@example.com"}, kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}

	mux := kyu.NewMux()
	done := make(chan struct{})
	mux.HandleFunc("email.send", func(ctx context.Context, job *kyu.Job) error {
		defer close(done)
		var p struct{ To string }
		if err := job.UnmarshalPayload(&p); err != nil {
			return kyu.Permanent(err)
		}
		fmt.Println("sending mail to", p.To)
		return job.SetResultJSON(map[string]string{"status": "sent"})
	})

	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: mux,
		Queues:  map[string]int{"default": 10},
	})
	if err != nil {
		log.Fatal(err)
	}
	// A program would call worker.Run(ctx) with a context that ends on
	// SIGINT/SIGTERM; here the worker stops once the job is done.
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}

	job, err := client.Get(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, string(job.Result))
	// Output:
	// sending mail to ada@example.com
	// completed {"status":"sent"}
}

func ExamplePermanent() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.Enqueue(ctx, "email.send", []byte(`{"to":"not an address"}`), kyu.EnqueueOptions{MaxAttempts: 5})
	if err != nil {
		log.Fatal(err)
	}

	runOnce(store, func(ctx context.Context, job *kyu.Job) error {
		// Retrying cannot fix bad input: fail now.
		return kyu.Permanent(errors.New("invalid address"))
	})

	job, err := client.Get(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s after %d of %d attempts: %s\n", job.State, job.Attempt, job.MaxAttempts, job.Errors[0].Message)
	// Output:
	// failed after 1 of 5 attempts: invalid address
}

func ExampleRetryAfter() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.Enqueue(ctx, "webhook.post", nil, kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}

	runOnce(store, func(ctx context.Context, job *kyu.Job) error {
		// The remote side said 429 Too Many Requests, Retry-After: 3600.
		return kyu.RetryAfter(time.Hour, errors.New("rate limited"))
	})

	job, err := client.Get(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, "in about", time.Until(job.RunAt).Round(time.Hour))
	fmt.Println(job.Errors[0].Message)
	// Output:
	// retry in about 1h0m0s
	// rate limited
}

func ExampleEnqueueOptions_uniqueKey() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	opts := kyu.EnqueueOptions{UniqueKey: "report:2030-01"}
	first, err := client.Enqueue(ctx, "report.build", nil, opts)
	if err != nil {
		log.Fatal(err)
	}
	// A duplicate is not an error: nothing is written, and the result
	// names the job that holds the key.
	second, err := client.Enqueue(ctx, "report.build", nil, opts)
	fmt.Println(err, second.Duplicate, second.ID == first.ID)

	// Another queue is another scope.
	other, err := client.Enqueue(ctx, "report.build", nil, kyu.EnqueueOptions{Queue: "reports", UniqueKey: opts.UniqueKey})
	fmt.Println(err, other.ID != first.ID)
	// Output:
	// <nil> true true
	// <nil> true
}

func ExampleClient_EnqueueAndWait() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	mux := kyu.NewMux()
	mux.HandleFunc("thumbnail", func(ctx context.Context, job *kyu.Job) error {
		var p struct{ Image string }
		if err := job.UnmarshalPayload(&p); err != nil {
			return kyu.Permanent(err)
		}
		return job.SetResultJSON(map[string]string{"thumbnail": "thumb-" + p.Image})
	})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Shutdown(ctx)

	// A foreground job: enqueue it and block until a worker has run it.
	client := kyu.NewClient(store, kyu.ClientConfig{})
	job, err := client.EnqueueAndWait(ctx, "thumbnail", []byte(`{"Image":"cat.png"}`), kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, string(job.Result))
	// Output:
	// completed {"thumbnail":"thumb-cat.png"}
}

func ExampleProgress() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	res, err := client.Enqueue(ctx, "import.csv", nil, kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}

	runOnce(store, func(ctx context.Context, job *kyu.Job) error {
		rows := []string{"ada", "grace", "edsger", "barbara"}
		for i, row := range rows {
			// ... import row ...
			if err := kyu.Progress(ctx, float64(i+1)*100/float64(len(rows)), "importing "+row); err != nil {
				return err
			}
		}
		return kyu.Logf(ctx, "imported %d rows", len(rows))
	})

	// A dashboard or a CLI reads them with the job.
	job, err := client.Get(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %.0f%% %s\n", job.State, job.Progress.Percent, job.Progress.Message)
	for _, l := range job.Logs {
		fmt.Println(l.Line)
	}
	// Output:
	// completed: 100% importing barbara
	// imported 4 rows
}

func ExampleClient_Cancel() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	// A job that has not started is cancelled at once.
	res, err := client.Enqueue(ctx, "newsletter.send", nil, kyu.EnqueueOptions{Delay: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	job, err := client.Cancel(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.CancelReason)

	// A running job: its handler's context ends at the worker's next
	// heartbeat, with the cause ErrCancelled.
	started := make(chan struct{})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			close(started)
			<-ctx.Done()
			fmt.Println("handler stopped:", errors.Is(context.Cause(ctx), kyu.ErrCancelled))
			return ctx.Err()
		}),
		HeartbeatInterval: 50 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Shutdown(ctx)
	res, err = client.Enqueue(ctx, "video.encode", nil, kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	<-started
	if _, err := client.Cancel(ctx, res.ID); err != nil {
		log.Fatal(err)
	}
	job, err = client.Wait(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.CancelReason)
	// Output:
	// cancelled requested
	// handler stopped: true
	// cancelled requested
}

func ExamplePeriodicJob() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	ran := make(chan struct{})
	var once sync.Once // the example stops after the first run
	mux := kyu.NewMux()
	mux.HandleFunc("report.build", func(ctx context.Context, job *kyu.Job) error {
		once.Do(func() {
			fmt.Println("building the report of schedule", job.Metadata["kyu.periodic"])
			close(ran)
		})
		return nil
	})
	// Every worker may list the same periodic jobs: each tick is enqueued
	// once. With CatchUpLast (the default) the tick missed before the
	// worker started is enqueued at once, so the example need not wait an
	// hour.
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: mux,
		Periodic: []kyu.PeriodicJob{
			{Name: "hourly-report", Spec: "0 * * * *", Type: "report.build"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-ran
	if err := worker.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// building the report of schedule hourly-report
}
