package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendurl"
)

// kyuJobType is the type of kyu's jobs.
const kyuJobType = "peers.noop"

// kyuSystem is kyu on one of its stores, opened by URL as any kyu program
// opens it, with default client and worker settings.
type kyuSystem struct {
	url    string
	wipe   func(ctx context.Context) error // empties the store while it is closed
	store  backend.Backend
	client *kyu.Client
}

// newKyuRedis is kyu on Redis in the key prefix "peerskyu".
func newKyuRedis(redisURL string) (*kyuSystem, error) {
	u, err := withQuery(redisURL, "prefix", "peerskyu")
	if err != nil {
		return nil, err
	}
	return &kyuSystem{url: u, wipe: func(ctx context.Context) error {
		return dropRedisKeys(ctx, redisURL, `\{peerskyu[:}]*`)
	}}, nil
}

// newKyuPostgres is kyu on PostgreSQL in the schema "peers_kyu".
func newKyuPostgres(pgURL string) (*kyuSystem, error) {
	u, err := withQuery(pgURL, "schema", "peers_kyu")
	if err != nil {
		return nil, err
	}
	return &kyuSystem{url: u, wipe: func(ctx context.Context) error {
		return dropSchema(ctx, pgURL, "peers_kyu")
	}}, nil
}

// newKyuEmbedded is kyu on its embedded store in a directory under dir.
func newKyuEmbedded(dir string) (*kyuSystem, error) {
	d, err := os.MkdirTemp(dir, "kyu-peers-*")
	if err != nil {
		return nil, err
	}
	return &kyuSystem{url: "pebble://" + d, wipe: func(context.Context) error {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		return os.MkdirAll(d, 0o755)
	}}, nil
}

func (k *kyuSystem) reset(ctx context.Context) error {
	if err := k.close(); err != nil {
		return err
	}
	if err := k.wipe(ctx); err != nil {
		return fmt.Errorf("empty the store: %w", err)
	}
	b, err := backendurl.Open(ctx, k.url, backendurl.Options{})
	if err != nil {
		return err
	}
	k.store, k.client = b, kyu.NewClient(b, kyu.ClientConfig{})
	return nil
}

func (k *kyuSystem) close() error {
	if k.store == nil {
		return nil
	}
	err := k.store.Close()
	k.store, k.client = nil, nil
	return err
}

func (k *kyuSystem) enqueueBatch(ctx context.Context, payloads [][]byte) error {
	specs := make([]kyu.JobSpec, len(payloads))
	for i, p := range payloads {
		specs[i] = kyu.JobSpec{Type: kyuJobType, Payload: p, EnqueueOptions: kyu.EnqueueOptions{Queue: queueName}}
	}
	_, err := k.client.EnqueueMany(ctx, specs)
	return err
}

func (k *kyuSystem) enqueueOne(ctx context.Context, payload []byte) error {
	_, err := k.client.Enqueue(ctx, kyuJobType, payload, kyu.EnqueueOptions{Queue: queueName})
	return err
}

func (k *kyuSystem) counts(ctx context.Context) (pending, completed int64, err error) {
	st, err := k.client.Stats(ctx, 0)
	if err != nil {
		return 0, 0, err
	}
	for _, q := range st.Queues {
		if q.Name == queueName {
			return q.Counts[kyu.StatePending], q.Counts[kyu.StateCompleted], nil
		}
	}
	return 0, 0, nil
}

func (k *kyuSystem) work(ctx context.Context, conc int, ran func()) (func(context.Context) error, error) {
	mux := kyu.NewMux()
	mux.HandleFunc(kyuJobType, func(context.Context, *kyu.Job) error {
		ran()
		return nil
	})
	w, err := kyu.NewWorker(k.store, kyu.WorkerConfig{Handler: mux, Queues: map[string]int{queueName: conc}})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w.Shutdown, nil
}
