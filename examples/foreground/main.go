// Command foreground shows a job as a request/response call: it starts a
// worker whose handler reports progress and log lines, enqueues a job,
// waits for its result, prints what the job recorded, and exits.
//
// Its store is the directory kyu-foreground-data, apart from kyu server's
// kyu-data (one process at a time can open an embedded store).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
)

// dataDir is the example's own embedded store.
const dataDir = "kyu-foreground-data"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, dataDir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run enqueues one job into the store in dir, waits for its result, prints
// it, and shuts the worker down.
func run(ctx context.Context, dir string, out io.Writer) error {
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		return err
	}
	defer store.Close()

	mux := kyu.NewMux()
	mux.HandleFunc("text.upper", func(ctx context.Context, job *kyu.Job) error {
		words := strings.Fields(string(job.Payload))
		upper := make([]string, len(words))
		for i, w := range words {
			upper[i] = strings.ToUpper(w)
			if err := kyu.Progress(ctx, float64(i+1)*100/float64(len(words)), "word "+w); err != nil {
				return err
			}
		}
		if err := kyu.Logf(ctx, "upper-cased %d words", len(words)); err != nil {
			return err
		}
		return job.SetResult([]byte(strings.Join(upper, " ")))
	})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux})
	if err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	// The worker stops gracefully on every way out, even a failed wait.
	defer worker.Shutdown(context.Background())

	client := kyu.NewClient(store, kyu.ClientConfig{})
	job, err := client.EnqueueAndWait(ctx, "text.upper", []byte("hello from kyu"), kyu.EnqueueOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %q, progress %.0f%%\n", job.State, job.Result, job.Progress.Percent)
	for _, l := range job.Logs {
		fmt.Fprintln(out, l.At.Format("15:04:05.000"), l.Line)
	}
	return worker.Shutdown(context.Background())
}
