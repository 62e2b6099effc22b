package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// call is one script run: the script and its KEYS and ARGV.
type call struct {
	s    *script
	keys []string
	args []string
}

func (s *store) evalCmd(c call, full bool) rueidis.Completed {
	b := s.client.B()
	if full {
		return b.Eval().Script(c.s.src()).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
	}
	return b.Evalsha().Sha1(c.s.sha()).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
}

// fcallCmd is c as an FCALL of its function in the library, if it has one
// and the server runs functions.
func (s *store) fcallCmd(c call) (rueidis.Completed, bool) {
	fn, ok := s.scripts.lib.fn[c.s]
	if !ok || s.noFunctions.Load() {
		return rueidis.Completed{}, false
	}
	return s.client.B().Fcall().Function(fn).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build(), true
}

// eval runs one script: FCALL (loading the library if the server lacks
// it), else EVALSHA, then EVAL if the server lacks the script.
func (s *store) eval(ctx context.Context, sc *script, keys, args []string) rueidis.RedisResult {
	return s.evalOn(ctx, s.client, call{s: sc, keys: keys, args: args})
}

// evalOn is eval of c through d: the shared client, or a connection of its
// own (runconn.go).
func (s *store) evalOn(ctx context.Context, d rueidis.CoreClient, c call) rueidis.RedisResult {
	if cmd, ok := s.fcallCmd(c); ok {
		res := d.Do(ctx, cmd)
		if !noFunction(res.Error()) {
			return res
		}
		if s.loadFunctions(ctx) == nil {
			if cmd, ok := s.fcallCmd(c); ok {
				if res := d.Do(ctx, cmd); !noFunction(res.Error()) {
					return res
				}
			}
		}
	}
	res := d.Do(ctx, s.evalCmd(c, false))
	if noScript(res.Error()) {
		res = d.Do(ctx, s.evalCmd(c, true))
	}
	return res
}

// evalMany runs scripts in one pipelined round trip (one per node on a
// cluster), each on its own; results come in the order of calls.
func (s *store) evalMany(ctx context.Context, calls []call) []rueidis.RedisResult {
	if len(calls) == 1 {
		return []rueidis.RedisResult{s.eval(ctx, calls[0].s, calls[0].keys, calls[0].args)}
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		if cmd, ok := s.fcallCmd(c); ok {
			cmds[i] = cmd
		} else {
			cmds[i] = s.evalCmd(c, false)
		}
	}
	res := s.client.DoMulti(ctx, cmds...)
	for i, r := range res {
		if err := r.Error(); noScript(err) || noFunction(err) {
			res[i] = s.eval(ctx, calls[i].s, calls[i].keys, calls[i].args)
		}
	}
	return res
}

func noScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// noFunction reports whether err says the server lacks a function.
func noFunction(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ")
	return strings.HasPrefix(msg, "Function not found")
}

// evalshaCost is what running the scripts by EVALSHA instead of FCALL
// costs Redis: its instructions per job (a lone enqueue, then a claim and
// a completion 50 jobs per call) under callgrind (TestCallgrindPhases),
// 140,200 by FCALL and 159,200 by EVALSHA (a server started with
// --rename-command FUNCTION "" gives that case), which runs common.lua's
// definitions on every call and keeps no parse between calls.
const evalshaCost = "about 14% more redis instructions per job"

// loadFunctions loads the library on every node (FUNCTION LOAD REPLACE,
// which is idempotent; replicas get it from their masters). A server that
// refuses it for good (older than Redis 7, or a managed one that forbids
// FUNCTION) is not asked again: the scripts then run by EVALSHA, which
// the store warns of once (the first call, at Open, meets the refusal)
// and Store.RunsFunctions reports. A server that is loading, busy or
// failing over is asked again at the next call.
func (s *store) loadFunctions(ctx context.Context) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	for addr, node := range s.client.Nodes() {
		err := node.Do(ctx, node.B().FunctionLoad().Replace().FunctionCode(s.scripts.lib.src).Build()).Error()
		if err == nil {
			continue
		}
		if re, ok := rueidis.IsRedisErr(err); ok {
			if strings.HasPrefix(re.Error(), "READONLY") {
				continue // a replica: it gets the library from its master
			}
			if !retryable(err) && !s.noFunctions.Swap(true) {
				s.log.Warn("redis refuses to load kyu's function library; running the scripts by EVALSHA, which costs "+evalshaCost+" (allow FUNCTION LOAD to kyu's redis user to avoid it)", "node", addr, "err", err)
			}
		}
		return fmt.Errorf("load the function library on %s: %w", addr, err)
	}
	return nil
}

// retry runs fn until it succeeds, fails for good, or the time to retry
// (Options.RetryFor), the context or the store runs out. fn learns the
// try's number (0 first), so a script can tell that an earlier try may
// have run. Connection errors and a server that is loading, busy or
// failing over are retried with exponential backoff and jitter.
func (s *store) retry(ctx context.Context, fn func(try int) error) error {
	start := time.Now()
	wait := 5 * time.Millisecond
	for try := 0; ; try++ {
		err := fn(try)
		if err == nil || !retryable(err) || time.Since(start) > s.opts.RetryFor {
			return err
		}
		if try == 0 || try%20 == 0 {
			s.log.Warn("redis call failed, retrying", "err", err, "try", try+1)
		}
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-s.done:
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// retryable reports whether err may go away by itself.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errClosing(err) {
		return false
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS", "MOVED", "ASK"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	if errors.Is(err, ErrCorrupt) {
		return false
	}
	return true
}
