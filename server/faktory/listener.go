package faktory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Listener serves FWP on one TCP address over a backend. Build it with
// New, then Start; Shutdown stops it.
type Listener struct {
	cfg     Config
	log     *slog.Logger
	b       backend.Backend
	leases  *leases
	workers *workers
	// acks and fails record ACKs and FAILs, many connections' at once.
	acks  *batcher[backend.CompleteItem]
	fails *batcher[backend.FailItem]
	// fetches claims for the FETCHes waiting; extends extends the
	// leases of the jobs they get.
	fetches *dispatcher
	extends *extender
	// stopping is closed when Shutdown begins: waits end, and each
	// connection closes after its command in flight.
	stopping chan struct{}
	// ctx is every command's context; cancel ends the commands left when
	// Shutdown's grace runs out.
	ctx    context.Context
	cancel context.CancelFunc

	// started is when Start ran; commands counts the commands answered
	// (both for INFO).
	started  time.Time
	commands atomic.Int64

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	once   sync.Once
	doneLn chan struct{}
}

// New checks cfg and builds a Listener; nothing listens until Start.
func New(cfg Config) (*Listener, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, now := cfg.Backend, cfg.Now
	l := &Listener{
		cfg: cfg, log: cfg.Logger, b: b,
		leases: newLeases(), workers: newWorkers(b),
		acks: &batcher[backend.CompleteItem]{apply: func(ctx context.Context, items []backend.CompleteItem) (backend.BatchResult, error) {
			return b.Complete(ctx, backend.CompleteParams{Items: items, Now: now()})
		}},
		fails: &batcher[backend.FailItem]{apply: func(ctx context.Context, items []backend.FailItem) (backend.BatchResult, error) {
			return b.Fail(ctx, backend.FailParams{Items: items, Now: now()})
		}},
		stopping: make(chan struct{}), ctx: ctx, cancel: cancel,
		conns: map[net.Conn]struct{}{},
	}
	l.fetches = newDispatcher(l)
	l.extends = &extender{l: l}
	return l, nil
}

// Start listens on Config.Addr and serves in the background. ctx bounds
// only the start.
func (l *Listener) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", l.cfg.Addr)
	if err != nil {
		return fmt.Errorf("faktory: listen: %w", err)
	}
	l.mu.Lock()
	if l.ln != nil {
		l.mu.Unlock()
		ln.Close()
		return errors.New("faktory: already started")
	}
	l.ln = ln
	l.started = l.cfg.Now()
	l.doneLn = make(chan struct{})
	l.mu.Unlock()
	go l.accept(ln)
	l.log.Info("kyu faktory listener", "addr", ln.Addr().String(), "auth", l.cfg.Password != "")
	return nil
}

// Addr is the address listened on, or nil before Start.
func (l *Listener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}

// accept serves each connection in its own goroutine until the listener
// closes.
func (l *Listener) accept(ln net.Listener) {
	defer close(l.doneLn)
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-l.stopping:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			l.log.Error("kyu faktory: accept", "err", err)
			return
		}
		delay = 0
		if !l.track(nc) {
			nc.Close()
			return
		}
		go func() {
			defer l.wg.Done()
			defer l.untrack(nc)
			l.serve(nc)
		}()
	}
}

// track adds a connection to those Shutdown waits for; false once
// Shutdown has begun.
func (l *Listener) track(nc net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stopping:
		return false
	default:
	}
	l.conns[nc] = struct{}{}
	l.wg.Add(1)
	return true
}

// untrack closes a connection and forgets it.
func (l *Listener) untrack(nc net.Conn) {
	nc.Close()
	l.mu.Lock()
	delete(l.conns, nc)
	l.mu.Unlock()
}

// Shutdown stops accepting, lets each connection finish the command in
// flight (a FETCH waiting answers nil at once) and closes it, and waits
// for them until ctx is done; then it closes the connections left. It
// does not close the backend.
func (l *Listener) Shutdown(ctx context.Context) error {
	var err error
	l.once.Do(func() { err = l.shutdown(ctx) })
	return err
}

// shutdown does Shutdown's work once.
func (l *Listener) shutdown(ctx context.Context) error {
	l.mu.Lock()
	close(l.stopping)
	ln, doneLn := l.ln, l.doneLn
	for nc := range l.conns {
		// Wake a connection blocked reading its next command; one in a
		// command sees stopping after it answers.
		nc.SetReadDeadline(time.Now())
	}
	l.mu.Unlock()
	if ln != nil {
		ln.Close()
		<-doneLn
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		// The claimers release what they claimed for fetchers gone and
		// what waits in their buffers.
		l.fetches.wg.Wait()
		l.extends.wg.Wait()
		l.cancel()
		return nil
	case <-ctx.Done():
	}
	l.cancel()
	l.mu.Lock()
	for nc := range l.conns {
		nc.Close()
	}
	l.mu.Unlock()
	<-done
	l.fetches.wg.Wait()
	l.extends.wg.Wait()
	return fmt.Errorf("faktory: shutdown: %w", ctx.Err())
}

// isStopping reports whether Shutdown has begun.
func (l *Listener) isStopping() bool {
	select {
	case <-l.stopping:
		return true
	default:
		return false
	}
}
