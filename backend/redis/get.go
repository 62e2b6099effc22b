package redis

import (
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// Get reads a job: its record, errors and result in one script run.
func (s *Store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	num, ok := queueNumOf(p.ID)
	if !ok {
		return nil, backend.ErrNotFound
	}
	queue, ok, err := s.queues.name(ctx, num)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, backend.ErrNotFound
	}
	var reply rueidis.RedisResult
	err = s.retry(ctx, func(int) error {
		reply = s.eval(ctx, getScript, s.keys.queue(num).all(), []string{p.ID})
		return reply.Error()
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: get %s: %w", p.ID, err)
	}
	parts, err := reply.ToArray()
	if err != nil || len(parts) != 3 {
		return nil, fmt.Errorf("kyu/redis: get %s: unexpected reply %s", p.ID, reply.String())
	}
	rec, err := parts[0].ToString()
	if err != nil {
		// A missing record comes back as nil (false in Lua).
		return nil, backend.ErrNotFound
	}
	j, err := decodeRecord(p.ID, queue, rec)
	if err != nil {
		return nil, err
	}
	if errs, err := parts[1].ToString(); err == nil {
		if j.Errors, err = decodeErrors(p.ID, errs); err != nil {
			return nil, err
		}
	}
	if res, err := parts[2].ToString(); err == nil {
		j.Result = []byte(res)
	}
	return j, nil
}

// Delete removes a job that is not active.
func (s *Store) Delete(ctx context.Context, p backend.DeleteParams) error {
	if err := backend.CheckNow(p.Now); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	num, ok := queueNumOf(p.ID)
	if !ok {
		return backend.ErrNotFound
	}
	if _, ok, err := s.queues.name(ctx, num); err != nil || !ok {
		if err != nil {
			return err
		}
		return backend.ErrNotFound
	}
	var reply rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		reply = s.eval(ctx, deleteScript, s.keys.queue(num).all(), []string{p.ID})
		return reply.Error()
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: delete %s: %w", p.ID, err)
	}
	code, err := reply.AsInt64()
	if err != nil {
		return fmt.Errorf("kyu/redis: delete %s: unexpected reply %s", p.ID, reply.String())
	}
	switch code {
	case 0:
		return nil
	case 1:
		return backend.ErrJobActive
	default:
		return backend.ErrNotFound
	}
}
