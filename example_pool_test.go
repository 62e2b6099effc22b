package kyu_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/kyuhq/kyu"
)

// A worker whose queues share one pool of handlers, in strict order:
// "critical" is served first, "default" only while "critical" is empty.
// With weights (every queue's Weight set) each claim would instead order
// the queues at random in proportion to them; a queue's Max caps how many
// of the pool's handlers it may take.
func ExamplePoolConfig() {
	store, cleanup := openExampleStore()
	defer cleanup()
	ctx := context.Background()

	client := kyu.NewClient(store, kyu.ClientConfig{})
	for _, queue := range []string{"default", "default", "critical", "critical"} {
		if _, err := client.Enqueue(ctx, "report", nil, kyu.EnqueueOptions{Queue: queue}); err != nil {
			log.Fatal(err)
		}
	}

	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	worker, err := kyu.NewWorker(store, kyu.WorkerConfig{
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, job.Queue)
			if len(order) == 4 {
				close(done)
			}
			return nil
		}),
		Pool: &kyu.PoolConfig{
			Concurrency: 1,
			Queues:      []kyu.PoolQueue{{Name: "critical"}, {Name: "default"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(order)
	// Output:
	// [critical critical default default]
}

// A pool's queues as logs show them.
func ExamplePoolQueue_String() {
	fmt.Println([]kyu.PoolQueue{{Name: "critical", Weight: 6, Max: 10}, {Name: "default", Weight: 3}, {Name: "mail"}})
	// Output: [critical(weight 6, max 10) default(weight 3) mail]
}
