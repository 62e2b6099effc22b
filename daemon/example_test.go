//go:build unix

package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/daemon"
)

// A daemon whose handler is a shell line: it reads the job on stdin and
// writes its result on fd 3.
func Example() {
	ctx := context.Background()
	store := memory.New()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	d, err := daemon.New(store, daemon.Config{
		Concurrency: 2,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handlers: map[string]daemon.HandlerConfig{
			"greet": {Shell: `read -r job; echo '{"result":"hello from '"$KYU_JOB_TYPE"'"}' >&3`},
		},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	job, err := client.EnqueueAndWait(ctx, "greet", []byte(`{"name":"Ada"}`), kyu.EnqueueOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(job.State, string(job.Result))

	d.Stop()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output: completed "hello from greet"
}
