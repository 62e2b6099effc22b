package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/rueidis"
)

// registry numbers the queues of a store. A queue's number is its keys'
// hash tag and is written into its jobs' ids; a number, once given, never
// changes, so each process caches what it has learnt.
//
// The registry lives in the store-wide keys {P}:queues (name -> number)
// and {P}:queue-names (number -> name), which only lua/register.lua writes;
// cross-queue steps (maintenance) read the list of queues from there and
// then run one script per queue.
type registry struct {
	s      *store
	mu     sync.RWMutex
	byName map[string]uint32
	byNum  map[uint32]string
}

func newRegistry(s *store) *registry {
	return &registry{s: s, byName: map[string]uint32{}, byNum: map[uint32]string{}}
}

func (r *registry) remember(name string, num uint32) {
	r.mu.Lock()
	r.byName[name] = num
	r.byNum[num] = name
	r.mu.Unlock()
}

// number returns the number of queue; with create it gives a new queue
// its number, otherwise ok is false for a queue that has none (it never
// held a job).
func (r *registry) number(ctx context.Context, name string, create bool) (num uint32, ok bool, err error) {
	r.mu.RLock()
	num, ok = r.byName[name]
	r.mu.RUnlock()
	if ok {
		return num, true, nil
	}
	k := r.s.keys
	var res rueidis.RedisResult
	err = r.s.retry(ctx, func(int) error {
		if create {
			sc := r.s.scripts.register
			res = r.s.eval(ctx, sc, sc.storeKeys(k), []string{name, strconv.Itoa(maxQueues)})
		} else {
			res = r.s.client.Do(ctx, r.s.client.B().Hget().Key(k.queues()).Field(name).Build())
		}
		if rueidis.IsRedisNil(res.Error()) {
			return nil
		}
		return res.Error()
	})
	if err != nil {
		return 0, false, fmt.Errorf("kyu/redis: queue %q: %w", name, err)
	}
	if rueidis.IsRedisNil(res.Error()) {
		return 0, false, nil
	}
	n, err := res.AsInt64()
	if err != nil || n < 1 || n > maxQueues {
		return 0, false, fmt.Errorf("%w: queue %q has number %q in %s", ErrCorrupt, name, res.String(), k.queues())
	}
	if create {
		if err := r.mark(ctx, name, uint32(n)); err != nil {
			return 0, false, err
		}
	}
	r.remember(name, uint32(n))
	return uint32(n), true, nil
}

// mark writes the queue's name into its keys (queueKeys.name), which the
// enqueue and claim scripts check, unless it is there already.
func (r *registry) mark(ctx context.Context, name string, num uint32) error {
	key := r.s.keys.queue(num).name()
	var res rueidis.RedisResult
	err := r.s.retry(ctx, func(int) error {
		res = r.s.client.Do(ctx, r.s.client.B().Set().Key(key).Value(name).Nx().Get().Build())
		if rueidis.IsRedisNil(res.Error()) {
			return nil
		}
		return res.Error()
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: mark queue %q: %w", name, err)
	}
	if old, err := res.ToString(); err == nil && old != name {
		return fmt.Errorf("%w: the registry gives number %d to queue %q but %s names queue %q", ErrCorrupt, num, name, key, old)
	}
	return nil
}

// forget drops what the cache knows of queue name, so the next lookup asks
// the registry.
func (r *registry) forget(name string) {
	r.mu.Lock()
	if num, ok := r.byName[name]; ok {
		delete(r.byNum, num)
	}
	delete(r.byName, name)
	r.mu.Unlock()
}

// name returns the name of queue number num; ok is false when no queue
// has it.
func (r *registry) name(ctx context.Context, num uint32) (name string, ok bool, err error) {
	r.mu.RLock()
	name, ok = r.byNum[num]
	r.mu.RUnlock()
	if ok || num == 0 {
		return name, ok, nil
	}
	k := r.s.keys
	var res rueidis.RedisResult
	err = r.s.retry(ctx, func(int) error {
		res = r.s.client.Do(ctx, r.s.client.B().Hget().Key(k.queueNames()).Field(strconv.FormatUint(uint64(num), 10)).Build())
		if rueidis.IsRedisNil(res.Error()) {
			return nil
		}
		return res.Error()
	})
	if err != nil {
		return "", false, fmt.Errorf("kyu/redis: queue number %d: %w", num, err)
	}
	if rueidis.IsRedisNil(res.Error()) {
		return "", false, nil
	}
	name, err = res.ToString()
	if err != nil {
		return "", false, fmt.Errorf("kyu/redis: queue number %d: %w", num, err)
	}
	r.remember(name, num)
	return name, true, nil
}

// all lists every queue of the store with its number.
func (r *registry) all(ctx context.Context) (map[string]uint32, error) {
	k := r.s.keys
	var res rueidis.RedisResult
	err := r.s.retry(ctx, func(int) error {
		res = r.s.client.Do(ctx, r.s.client.B().Hgetall().Key(k.queues()).Build())
		return res.Error()
	})
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: list queues: %w", err)
	}
	m, err := res.AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: list queues: %w", err)
	}
	out := make(map[string]uint32, len(m))
	for name, v := range m {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > maxQueues {
			return nil, fmt.Errorf("%w: queue %q has number %q in %s", ErrCorrupt, name, v, k.queues())
		}
		out[name] = uint32(n)
		r.remember(name, uint32(n))
	}
	return out, nil
}
