package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// leader is the key of the Leader lease name: a hash with holder, epoch
// and expires (ms), kept after a lease ends so its epoch counts on
// (lua/lead.lua, lua/resign.lua).
func (k keys) leader(name string) string { return k.globalTag() + ":leader:" + name }

// Lead takes or renews the lease p.Name for p.Holder, or reports who holds
// it (see backend.Leader): one script, one round trip.
func (s *store) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	if err := s.enter(); err != nil {
		return backend.Leadership{}, err
	}
	defer s.leave()
	args := []string{ms(p.Now.UnixMilli()), p.Holder, strconv.FormatInt(p.TTL.Milliseconds(), 10)}
	var l backend.Leadership
	err := s.retry(ctx, func(int) error {
		reply := s.eval(ctx, s.scripts.lead, s.scripts.lead.leaseKeys(s.keys, p.Name), args)
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
func (s *store) Resign(ctx context.Context, p backend.ResignParams) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	args := []string{p.Holder, strconv.FormatInt(p.Epoch, 10)}
	err := s.retry(ctx, func(int) error {
		return s.eval(ctx, s.scripts.resign, s.scripts.resign.leaseKeys(s.keys, p.Name), args).Error()
	})
	if err != nil {
		return fmt.Errorf("kyu/redis: resign %q: %w", p.Name, err)
	}
	return nil
}
