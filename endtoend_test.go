package kyu_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/postgres"
	"github.com/kyuhq/kyu/backend/redis"
)

// The worker tests run on the in-memory store; these run one scenario on
// each real store, on real time: a client and two workers, one after the
// other, through every outcome, with the store's own wake-ups and
// finished signals doing all the waking (both poll intervals are an
// hour). The other root test on a real store is TestWorkerCrash (pebble,
// kill -9 of a child process).
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) backend.Backend
	}{
		{"pebble", func(t *testing.T) backend.Backend { return newPebble(t) }},
		{"redis", openRedis},
		{"postgres", openPostgres},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endToEnd(t, tc.open(t))
		})
	}
}

// endToEnd enqueues a job of each outcome, waits for each with
// Client.Wait, then stops the worker while a job runs and checks that a
// second worker, as after a restart, finishes it.
func endToEnd(t *testing.T, s backend.Backend) {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c := kyu.NewClient(s, kyu.ClientConfig{WaitPollInterval: time.Hour})
	started := make(chan string, 1)
	var logs logBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the workers' log:\n%s", logs.String())
		}
	})
	mux := kyu.NewMux()
	mux.HandleFunc("greet", func(ctx context.Context, job *kyu.Job) error {
		if err := kyu.Progress(ctx, 100, "greeted"); err != nil {
			return err
		}
		if err := kyu.Log(ctx, "hello "+string(job.Payload)); err != nil {
			return err
		}
		return job.SetResult([]byte("hello " + string(job.Payload)))
	})
	mux.HandleFunc("flaky", func(ctx context.Context, job *kyu.Job) error {
		if job.Attempt == 1 {
			return errors.New("first try fails")
		}
		return nil
	})
	mux.HandleFunc("doomed", func(context.Context, *kyu.Job) error {
		return kyu.Permanent(errors.New("bad input"))
	})
	mux.HandleFunc("long", func(ctx context.Context, job *kyu.Job) error {
		started <- job.ID
		<-ctx.Done()
		return ctx.Err()
	})
	cfg := kyu.WorkerConfig{
		Handler:       mux,
		Queues:        map[string]int{"default": 4},
		Backoff:       kyu.FixedBackoff(0),
		PollInterval:  time.Hour,
		ShutdownGrace: kyu.NoShutdownGrace,
		Logger:        logs.logger(),
	}
	w := startWorker(t, s, cfg)

	job := waitFinal(t, c, enqueue(t, c, "greet", []byte("ada"), kyu.EnqueueOptions{}))
	if job.State != kyu.StateCompleted || string(job.Result) != "hello ada" || job.Progress == nil ||
		job.Progress.Percent != 100 || len(job.Logs) != 1 || job.Logs[0].Line != "hello ada" {
		t.Errorf("greet: %s with result %q, progress %+v, logs %+v; want completed, \"hello ada\", 100%%, one line",
			job.State, job.Result, job.Progress, job.Logs)
	}
	job = waitFinal(t, c, enqueue(t, c, "flaky", nil, kyu.EnqueueOptions{}))
	if job.State != kyu.StateCompleted || job.Attempt != 2 || len(job.Errors) != 1 || job.Errors[0].Message != "first try fails" {
		t.Errorf("flaky: %s at attempt %d with errors %+v; want completed at attempt 2 after one failure", job.State, job.Attempt, job.Errors)
	}
	job = waitFinal(t, c, enqueue(t, c, "doomed", nil, kyu.EnqueueOptions{MaxAttempts: 5}))
	if job.State != kyu.StateFailed || job.Attempt != 1 || len(job.Errors) != 1 || job.Errors[0].Message != "bad input" {
		t.Errorf("doomed: %s at attempt %d with errors %+v; want failed at attempt 1", job.State, job.Attempt, job.Errors)
	}

	// Shutdown hands the running job back at once; a new worker runs it.
	id := enqueue(t, c, "long", nil, kyu.EnqueueOptions{})
	if got := recv(t, started, "the long job to start"); got != id {
		t.Fatalf("started %s, want %s", got, id)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Succeeded != 2 || st.Failed != 2 {
		t.Errorf("first worker's stats = %+v; want 2 succeeded, 2 failed", st)
	}
	job, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != kyu.StatePending || len(job.Errors) != 1 || job.Errors[0].Kind != backend.AttemptInterrupted {
		t.Fatalf("after Shutdown the long job is %s with errors %+v; want pending after one interrupted attempt", job.State, job.Errors)
	}
	cfg.Handler = kyu.HandlerFunc(func(context.Context, *kyu.Job) error { return nil })
	startWorker(t, s, cfg)
	if job := waitFinal(t, c, id); job.State != kyu.StateCompleted {
		t.Fatalf("the handed-back job ended %s with errors %+v; want completed", job.State, job.Errors)
	}
}

// openRedis opens a store on the test Redis server in a key prefix of its
// own, removed at cleanup; it skips or fails as backendtest.Unreachable
// says when the server cannot be reached.
func openRedis(t *testing.T) backend.Backend {
	t.Helper()
	const env = "KYU_TEST_REDIS_URL"
	url := backendtest.ServiceURL(env, "redis://127.0.0.1:6379/0")
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	o.Prefix = "kyutest-root-" + randomHex(t)
	o.RetryFor = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redis.Open(ctx, o)
	if err != nil {
		backendtest.Unreachable(t, "redis", env, url, err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		dropRedisPrefix(t, o)
	})
	return s
}

// dropRedisPrefix deletes every key that holds the store's prefix: the
// prefix is random, so no other key does.
func dropRedisPrefix(t *testing.T, o redis.Options) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: o.Addrs, Username: o.Username, Password: o.Password, SelectDB: o.DB, TLSConfig: o.TLS,
		DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		t.Errorf("remove the keys of prefix %s: %v", o.Prefix, err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("*"+o.Prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Errorf("remove the keys of prefix %s: %v", o.Prefix, err)
			return
		}
		if len(e.Elements) > 0 {
			if err := c.Do(ctx, c.B().Unlink().Key(e.Elements...).Build()).Error(); err != nil {
				t.Errorf("remove the keys of prefix %s: %v", o.Prefix, err)
				return
			}
		}
		if e.Cursor == 0 {
			return
		}
		cursor = e.Cursor
	}
}

// openPostgres opens a store on the test PostgreSQL server in a schema of
// its own, dropped at cleanup; it skips or fails as
// backendtest.Unreachable says when the server cannot be reached.
func openPostgres(t *testing.T) backend.Backend {
	t.Helper()
	const env = "KYU_TEST_POSTGRES_URL"
	url := backendtest.ServiceURL(env, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		err = conn.Ping(ctx)
	}
	if err != nil {
		backendtest.Unreachable(t, "postgres", env, url, err)
	}
	schema := "kyu_test_root_" + randomHex(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	s, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, AutoMigrate: true, MaxConns: 4})
	if err != nil {
		t.Fatalf("open postgres store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// randomHex returns 12 random hex digits, lower case.
func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(hex.EncodeToString(b))
}
