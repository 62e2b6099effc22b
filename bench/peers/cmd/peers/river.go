package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSchema is the PostgreSQL schema of River's tables.
const riverSchema = "peers_river"

// riverArgs are the arguments of River's jobs: {"p":"xx…"}, the same
// 100-byte JSON document as the other systems' payloads.
type riverArgs struct {
	P string `json:"p"`
}

// Kind names the job kind.
func (riverArgs) Kind() string { return "peers_noop" }

// riverWorker runs River's jobs.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	ran func()
}

// Work counts the job and succeeds.
func (w *riverWorker) Work(context.Context, *river.Job[riverArgs]) error {
	w.ran()
	return nil
}

// riverSystem is River with its pgx driver on PostgreSQL, in a schema of
// its own migrated by River's migrator, through a pool of 20 connections.
// Its workers fetch at most every millisecond (FetchCooldown; the default
// is 100 ms, which caps a drain) and poll every 20 ms when no insert
// notification arrives (FetchPollInterval; default 1 s).
type riverSystem struct {
	url    string
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	logger *slog.Logger
}

func newRiver(pgURL string) *riverSystem {
	return &riverSystem{
		url:    pgURL,
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func (r *riverSystem) reset(ctx context.Context) error {
	if err := r.close(); err != nil {
		return err
	}
	if err := dropSchema(ctx, r.url, riverSchema); err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(r.url)
	if err != nil {
		return err
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	r.pool = pool
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: riverSchema, Logger: r.logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	r.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: riverSchema, Logger: r.logger})
	return err
}

func (r *riverSystem) close() error {
	if r.pool != nil {
		r.pool.Close()
	}
	r.pool, r.client = nil, nil
	return nil
}

func (r *riverSystem) insertOpts() *river.InsertOpts { return &river.InsertOpts{Queue: queueName} }

// enqueueBatch uses InsertMany, which, like kyu's EnqueueMany, returns a
// result per job (InsertManyFast returns only a count).
func (r *riverSystem) enqueueBatch(ctx context.Context, payloads [][]byte) error {
	ps := make([]river.InsertManyParams, len(payloads))
	for i, p := range payloads {
		ps[i] = river.InsertManyParams{Args: argsOf(p), InsertOpts: r.insertOpts()}
	}
	_, err := r.client.InsertMany(ctx, ps)
	return err
}

func (r *riverSystem) enqueueOne(ctx context.Context, payload []byte) error {
	_, err := r.client.Insert(ctx, argsOf(payload), r.insertOpts())
	return err
}

// argsOf returns the arguments whose JSON is payload ({"p":"xx…"}).
func argsOf(payload []byte) riverArgs {
	return riverArgs{P: string(payload[len(`{"p":"`) : len(payload)-len(`"}`)])}
}

// counts reads River's job table: available jobs wait, completed ones
// are kept for a day by default.
func (r *riverSystem) counts(ctx context.Context) (pending, completed int64, err error) {
	err = r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'available'), count(*) FILTER (WHERE state = 'completed')
		FROM `+riverSchema+`.river_job WHERE queue = $1`, queueName).Scan(&pending, &completed)
	return pending, completed, err
}

func (r *riverSystem) work(ctx context.Context, conc int, ran func()) (func(context.Context) error, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{ran: ran}); err != nil {
		return nil, err
	}
	c, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Schema:            riverSchema,
		Logger:            r.logger,
		Queues:            map[string]river.QueueConfig{queueName: {MaxWorkers: conc}},
		Workers:           workers,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c.Stop, nil
}
