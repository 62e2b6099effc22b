// Command quickstart enqueues a job into the embedded store and processes
// it with a worker, until Ctrl-C. It is the example of README.md.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, err := pebble.Open("kyu-data", pebble.Options{}) // durable, nothing to install
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	if _, err := client.EnqueueJSON(ctx, "email.send", map[string]string{"to": "ada@example.com"}, kyu.EnqueueOptions{}); err != nil {
		log.Fatal(err)
	}

	mux := kyu.NewMux()
	mux.HandleFunc("email.send", func(ctx context.Context, job *kyu.Job) error {
		fmt.Printf("sending %s (attempt %d)\n", job.Payload, job.Attempt)
		return nil // an error is retried with backoff; kyu.Permanent(err) is not
	})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux})
	if err != nil {
		log.Fatal(err)
	}
	worker.Run(ctx) // until Ctrl-C, then a graceful shutdown
}
