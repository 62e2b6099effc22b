package redis

import (
	"cmp"
	"context"
	"fmt"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// jobQueue finds the queue of a job from its id; ok is false when the id
// names no queue (so no job).
func (s *store) jobQueue(ctx context.Context, id string) (num uint32, queue string, ok bool, err error) {
	num, ok = queueNumOf(id)
	if !ok {
		return 0, "", false, nil
	}
	queue, ok, err = s.queues.name(ctx, num)
	if err == nil && !ok {
		// No queue has the id's number: an imported job's, perhaps.
		return s.jobHome(ctx, id)
	}
	return num, queue, ok, err
}

// runOne runs one script on one queue's keys, retrying as retry does.
func (s *store) runOne(ctx context.Context, op string, num uint32, sc *script, args []string) (rueidis.RedisResult, error) {
	var reply rueidis.RedisResult
	err := s.retry(ctx, func(int) error {
		reply = s.eval(ctx, sc, s.keysOf(sc, num), args)
		return reply.Error()
	})
	if err != nil {
		return reply, fmt.Errorf("kyu/redis: %s: %w", op, err)
	}
	return reply, nil
}

// viewReply reads a script's view reply (see view in lua/common.lua): its
// code and, for code 0, the job. other is the second value of a refusal
// ({3, state letter}, {5, holder id}). A job that no longer exists (the
// view of a job deleted by its own retention) still comes back whole.
func viewReply(op, id, queue string, reply rueidis.RedisResult) (code int64, j *backend.Job, other string, err error) {
	unexpected := func() error { return fmt.Errorf("kyu/redis: %s %s: unexpected reply %s", op, id, reply.String()) }
	parts, err := reply.ToArray()
	if err != nil || len(parts) == 0 {
		return 0, nil, "", unexpected()
	}
	if parts[0].IsNil() {
		return 2, nil, "", nil
	}
	if code, err = parts[0].AsInt64(); err != nil {
		return 0, nil, "", unexpected()
	}
	if code != 0 {
		if len(parts) > 1 {
			other, _ = parts[1].ToString()
		}
		return code, nil, other, nil
	}
	if len(parts) != 8 {
		return 0, nil, "", unexpected()
	}
	j, err = jobOfView(id, queue, parts[1:])
	if err != nil {
		return 0, nil, "", err
	}
	if j == nil {
		return 2, nil, "", nil
	}
	return 0, j, "", nil
}

// jobOfView decodes the seven values of a view after its code: record,
// errors, result, progress, logs, log counts, deletion time. A missing
// record gives a nil job.
func jobOfView(id, queue string, v []rueidis.RedisMessage) (*backend.Job, error) {
	rec, err := v[0].ToString()
	if err != nil {
		return nil, nil
	}
	j, err := decodeRecord(id, queue, rec)
	if err != nil {
		return nil, err
	}
	var x jobExtras
	for i, p := range []**string{&x.errors, &x.result, &x.progress, &x.logs, &x.logCounts, &x.expires} {
		if s, err := v[1+i].ToString(); err == nil {
			*p = &s
		}
	}
	if err := x.apply(j); err != nil {
		return nil, err
	}
	return j, nil
}

// Get reads a job, named by its id or by its JID (jid.go): its record,
// errors, result, reports and expiry in one script run.
func (s *store) Get(ctx context.Context, p backend.GetParams) (*backend.Job, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if p.JID != "" {
		return s.getJID(ctx, p.JID)
	}
	return s.getID(ctx, p.ID)
}

// getID reads the job with this id.
func (s *store) getID(ctx context.Context, id string) (*backend.Job, error) {
	p := backend.GetParams{ID: id}
	num, queue, ok, err := s.jobQueue(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, backend.ErrNotFound
	}
	for try := 0; ; try++ {
		reply, err := s.runOne(ctx, "get "+p.ID, num, s.scripts.get, []string{p.ID})
		if err != nil {
			return nil, err
		}
		code, j, _, err := viewReply("get", p.ID, queue, reply)
		if err != nil {
			return nil, err
		}
		if code == 0 {
			return j, nil
		}
		if try > 0 {
			return nil, backend.ErrNotFound
		}
		if num, queue, ok, err = s.elsewhere(ctx, p.ID, num); err != nil || !ok {
			return nil, cmp.Or(err, backend.ErrNotFound)
		}
	}
}

// Delete removes a job that is not active.
func (s *store) Delete(ctx context.Context, p backend.DeleteParams) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	num, _, ok, err := s.jobQueue(ctx, p.ID)
	if err != nil {
		return err
	}
	if !ok {
		return backend.ErrNotFound
	}
	for try := 0; ; try++ {
		reply, err := s.runOne(ctx, "delete "+p.ID, num, s.scripts.delete, []string{p.ID})
		if err != nil {
			return err
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
		}
		if try > 0 {
			return backend.ErrNotFound
		}
		if num, _, ok, err = s.elsewhere(ctx, p.ID, num); err != nil || !ok {
			return cmp.Or(err, backend.ErrNotFound)
		}
	}
}
