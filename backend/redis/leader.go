package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// leader is the key of the Leader lease name: a hash with holder, epoch
// and expires (ms), kept after a lease ends so its epoch counts on.
func (k keys) leader(name string) string { return k.globalTag() + ":leader:" + name }

// leadScript takes or renews a lease (see backend.Leader).
//
// KEYS: 1 the lease hash. ARGV: 1 now ms, 2 holder, 3 TTL ms.
// Returns {held (1 or 0), holder, epoch, expires ms}.
var leadScript = rawScript("lead", `
local now, holder, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local h = redis.call('HMGET', KEYS[1], 'holder', 'epoch', 'expires')
local cur, epoch, expires = h[1] or '', tonumber(h[2]) or 0, tonumber(h[3]) or 0
if cur ~= '' and now < expires then
  if cur ~= holder then return {0, cur, epoch, expires} end
  expires = now + ttl
  redis.call('HSET', KEYS[1], 'expires', expires)
  return {1, cur, epoch, expires}
end
epoch, expires = epoch + 1, now + ttl
redis.call('HSET', KEYS[1], 'holder', holder, 'epoch', epoch, 'expires', expires)
return {1, holder, epoch, expires}
`)

// resignScript ends a lease its holder holds in the given term.
//
// KEYS: 1 the lease hash. ARGV: 1 holder, 2 epoch. Returns 1 when it
// ended the lease, else 0.
var resignScript = rawScript("resign", `
local h = redis.call('HMGET', KEYS[1], 'holder', 'epoch')
if (h[1] or '') ~= ARGV[1] or h[2] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'holder', '', 'expires', 0)
return 1
`)

// Lead takes or renews the lease p.Name for p.Holder, or reports who holds
// it (see backend.Leader): one script, one round trip.
func (s *Store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := p.Check(); err != nil {
		return backend.Leadership{}, err
	}
	if err := s.enter(); err != nil {
		return backend.Leadership{}, err
	}
	defer s.leave()
	args := []string{ms(p.Now.UnixMilli()), p.Holder, strconv.FormatInt(p.TTL.Milliseconds(), 10)}
	var l backend.Leadership
	err := s.retry(ctx, func(int) error {
		reply := s.eval(ctx, leadScript, []string{s.keys.leader(p.Name)}, args)
		v, err := reply.ToArray()
		if err != nil {
			return err
		}
		if len(v) != 4 {
			return fmt.Errorf("unexpected reply %s", reply.String())
		}
		held, err := v[0].AsInt64()
		if err != nil {
			return err
		}
		if l.Holder, err = v[1].ToString(); err != nil {
			return err
		}
		if l.Epoch, err = v[2].AsInt64(); err != nil {
			return err
		}
		exp, err := v[3].AsInt64()
		if err != nil {
			return err
		}
		l.Held, l.ExpiresAt = held == 1, time.UnixMilli(exp).UTC()
		return nil
	})
	if err != nil {
		return backend.Leadership{}, fmt.Errorf("kyu/redis: lead %q: %w", p.Name, err)
	}
	return l, nil
}

// Resign gives up a lease p.Holder holds in term p.Epoch.
func (s *Store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	args := []string{p.Holder, strconv.FormatInt(p.Epoch, 10)}
	err := s.retry(ctx, func(int) error {
		return s.eval(ctx, resignScript, []string{s.keys.leader(p.Name)}, args).Error()
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: resign %q: %w", p.Name, err)
	}
	return nil
}
