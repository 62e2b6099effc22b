// Command quickstart enqueues a job into the embedded store and processes
// it with a worker, until Ctrl-C. It is the example of README.md.
//
// Its store is the directory kyu-quickstart-data, so it runs beside a
// `kyu server`, whose default store is kyu-data (one process at a time can
// open an embedded store).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
)

// dataDir is the example's own embedded store, apart from kyu server's.
const dataDir = "kyu-quickstart-data"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, dataDir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run enqueues one job into the store in dir and works until ctx ends.
func run(ctx context.Context, dir string, out io.Writer) error {
	store, err := pebble.Open(dir, pebble.Options{}) // durable, nothing to install
	if err != nil {
		return err
	}
	defer store.Close()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	if _, err := client.EnqueueJSON(ctx, "email.send", map[string]string{"to": "ada@example.com"}, kyu.EnqueueOptions{}); err != nil {
		return err
	}

	mux := kyu.NewMux()
	mux.HandleFunc("email.send", func(ctx context.Context, job *kyu.Job) error {
		fmt.Fprintf(out, "sending %s (attempt %d)\n", job.Payload, job.Attempt)
		return nil // an error is retried with backoff; kyu.Permanent(err) is not
	})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux})
	if err != nil {
		return err
	}
	return worker.Run(ctx) // until Ctrl-C, then a graceful shutdown
}
