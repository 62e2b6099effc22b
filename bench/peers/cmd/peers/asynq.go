package main

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// asynqTaskType is the type of asynq's tasks.
const asynqTaskType = "peers:noop"

// asynqSystem is asynq on Redis, in its own key namespace ("asynq:"), in
// the database of the Redis URL. Completed tasks are kept for a day
// (Retention), as kyu, BullMQ and River keep theirs by default, so that
// the store counts them.
type asynqSystem struct {
	url       string
	opt       asynq.RedisConnOpt
	client    *asynq.Client
	inspector *asynq.Inspector
}

func newAsynq(redisURL string) (*asynqSystem, error) {
	opt, err := asynq.ParseRedisURI(redisURL)
	if err != nil {
		return nil, err
	}
	return &asynqSystem{url: redisURL, opt: opt}, nil
}

func (a *asynqSystem) reset(ctx context.Context) error {
	if err := a.close(); err != nil {
		return err
	}
	if err := dropRedisKeys(ctx, a.url, "asynq:*"); err != nil {
		return err
	}
	a.client, a.inspector = asynq.NewClient(a.opt), asynq.NewInspector(a.opt)
	return nil
}

func (a *asynqSystem) close() error {
	var errs []error
	if a.client != nil {
		errs = append(errs, a.client.Close())
	}
	if a.inspector != nil {
		errs = append(errs, a.inspector.Close())
	}
	a.client, a.inspector = nil, nil
	return errors.Join(errs...)
}

func (a *asynqSystem) enqueueBatch(context.Context, [][]byte) error { return errNoBatch }

func (a *asynqSystem) enqueueOne(ctx context.Context, payload []byte) error {
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask(asynqTaskType, payload), asynq.Queue(queueName), asynq.Retention(24*time.Hour))
	return err
}

func (a *asynqSystem) counts(context.Context) (pending, completed int64, err error) {
	qi, err := a.inspector.GetQueueInfo(queueName)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return int64(qi.Pending), int64(qi.Completed), nil
}

// work runs an asynq server checking for new tasks every millisecond when
// its queue is empty (TaskCheckInterval; the default is a second), its
// fastest idle setting.
func (a *asynqSystem) work(_ context.Context, conc int, ran func()) (func(context.Context) error, error) {
	srv := asynq.NewServer(a.opt, asynq.Config{
		Concurrency:       conc,
		Queues:            map[string]int{queueName: 1},
		TaskCheckInterval: time.Millisecond,
		LogLevel:          asynq.WarnLevel,
	})
	h := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		ran()
		return nil
	})
	if err := srv.Start(h); err != nil {
		return nil, err
	}
	return func(context.Context) error { srv.Shutdown(); return nil }, nil
}
