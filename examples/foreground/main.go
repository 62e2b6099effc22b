// Command foreground shows a job as a request/response call: it starts a
// worker whose handler reports progress and log lines, enqueues a job and
// waits for its result (Gearman's foreground jobs), prints what the job
// recorded, and keeps a periodic job enqueued every minute until Ctrl-C.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/pebble"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store, err := pebble.Open("kyu-data", pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	mux := kyu.NewMux()
	mux.HandleFunc("text.upper", func(ctx context.Context, job *kyu.Job) error {
		words := strings.Fields(string(job.Payload))
		out := make([]string, len(words))
		for i, w := range words {
			out[i] = strings.ToUpper(w)
			if err := kyu.Progress(ctx, float64(i+1)*100/float64(len(words)), "word "+w); err != nil {
				return err
			}
		}
		if err := kyu.Logf(ctx, "upper-cased %d words", len(words)); err != nil {
			return err
		}
		job.SetResult([]byte(strings.Join(out, " ")))
		return nil
	})
	mux.HandleFunc("heartbeat.log", func(ctx context.Context, job *kyu.Job) error {
		fmt.Println("periodic tick", job.Metadata["kyu.tick"])
		return nil
	})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: mux,
		Periodic: []kyu.PeriodicJob{
			{Name: "minutely-heartbeat", Spec: "@every 1m", Type: "heartbeat.log"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}

	client := kyu.NewClient(store, kyu.ClientConfig{})
	job, err := client.EnqueueAndWait(ctx, "text.upper", []byte("hello from kyu"), kyu.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %q, progress %.0f%%\n", job.State, job.Result, job.Progress.Percent)
	for _, l := range job.Logs {
		fmt.Println(l.At.Format("15:04:05.000"), l.Line)
	}

	<-ctx.Done() // Ctrl-C
	if err := worker.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
}
