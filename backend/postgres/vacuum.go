package postgres

import (
	"context"
	"sync/atomic"
	"time"
)

// DefaultVacuumEvery is Options.VacuumEvery's default on a server whose
// autovacuum is off.
const DefaultVacuumEvery = 25000

// vacuumTimeout bounds one VACUUM of the store.
const vacuumTimeout = 5 * time.Minute

// vacuumer runs VACUUM on the jobs table after every so many claims, for
// servers whose autovacuum is off. A claim leaves a dead entry at the front
// of the claim index; nothing but VACUUM removes it, and every later claim
// steps over all of them, so without vacuuming a long drain slows down as
// it goes.
type vacuumer struct {
	s     *store
	every int64

	claimed atomic.Int64
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// newVacuumer returns a vacuumer, or nil when every is not positive.
func newVacuumer(s *store, every int) *vacuumer {
	if every <= 0 {
		return nil
	}
	return &vacuumer{s: s, every: int64(every), kick: make(chan struct{}, 1)}
}

// start runs the vacuumer's goroutine.
func (v *vacuumer) start() {
	if v == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel, v.done = cancel, make(chan struct{})
	go v.run(ctx)
}

// stop ends the goroutine, cancelling a VACUUM in flight.
func (v *vacuumer) stop() {
	if v == nil || v.cancel == nil {
		return
	}
	v.cancel()
	<-v.done
}

// note counts claimed jobs and asks for a VACUUM after every v.every.
func (v *vacuumer) note(n int) {
	if v == nil || n == 0 {
		return
	}
	if v.claimed.Add(int64(n)) >= v.every {
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

func (v *vacuumer) run(ctx context.Context) {
	defer close(v.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.kick:
		}
		v.claimed.Store(0)
		vctx, cancel := context.WithTimeout(ctx, vacuumTimeout)
		start := time.Now()
		// SKIP_LOCKED: when another process is vacuuming the table, this
		// one has nothing to add.
		_, err := v.s.pool.Exec(vctx, "VACUUM (SKIP_LOCKED) "+v.s.schema+".jobs")
		cancel()
		if err != nil && ctx.Err() == nil {
			v.s.log.Warn("kyu/postgres: VACUUM of the jobs table failed", "schema", v.s.opts.Schema, "err", err)
			continue
		}
		v.s.log.Debug("kyu/postgres: vacuumed the jobs table", "schema", v.s.opts.Schema, "took", time.Since(start))
	}
}
