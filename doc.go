// Package kyu is a background-job system: a priority job queue with durable
// storage, and workers with a careful lifecycle.
//
// A Client enqueues jobs into a backend.Backend (the embedded Pebble store,
// Redis, PostgreSQL, MySQL or a kyu server over HTTP); a Worker claims them
// under leases, runs the Handler registered for their type, and records the
// outcome. Every claim is a lease with a heartbeat and a fencing token: a
// worker that crashes or hangs loses its lease, the job is recovered and
// run again, and the stale worker can no longer complete it.
//
//	store, _ := pebble.Open("kyu-data", pebble.Options{})
//	client := kyu.NewClient(store, kyu.ClientConfig{})
//	client.Enqueue(ctx, "email.send", payload, kyu.EnqueueOptions{Queue: "mail"})
//
//	mux := kyu.NewMux()
//	mux.HandleFunc("email.send", func(ctx context.Context, job *kyu.Job) error { ... })
//	worker, _ := kyu.NewWorker(store, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{"mail": 10}})
//	worker.Run(ctx)
package kyu
