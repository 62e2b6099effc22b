// Package redis is kyu's Redis store: backend.Backend on Redis 7
// (standalone, Sentinel or Cluster), through the rueidis client, whose
// automatic pipelining lets many goroutines share few connections.
//
// Every state change is one Lua script over the keys of one queue (see
// keys.go for the layout and lua/ for the scripts), so a crash
// between two commands never leaves a job half-moved, and every script
// runs in one Cluster slot: the lifecycle operations (cancel, retry, run
// now, purge, reports, queue settings) too. The scripts run as functions
// of one Redis Functions library (FCALL), which the store loads on every
// node that lacks it (FUNCTION LOAD), or by EVALSHA on servers that
// refuse functions, at some 14% more Redis instructions per job (the
// store warns of it, and Store.RunsFunctions reports it). Single-job
// enqueues of one queue that come while others are on their way share
// one script run (coalesce.go), sent on a connection of its own
// (runconn.go). Views across queues (List, Stats) run one read per
// queue and merge here; the worker registry has store-wide keys of its
// own, and so have JIDs (jid.go): on one server (standalone or
// Sentinel) every queue's scripts keep the store-wide JID index with the
// job, so a JID is unique across the store exactly; on a Cluster, where a script keeps to one slot, a JID
// is unique within its queue exactly, and across queues by a reservation
// in the store-wide index that Enqueue and Import take before they write
// (a client that dies between the two leaves the JID held by no job for
// Options.RetryFor plus ten seconds). Idle workers wake, and
// watchers of a job hear its end, through Pub/Sub (notify.go); an idle
// worker's waiting claim is filled by an enqueue of the same Store in
// that enqueue's round trip (handoff.go). Calls
// retry with backoff while the server restarts or fails over
// (Options.RetryFor).
package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// formatVersion is the key layout this package writes in a new store,
// kept in the marker. Format 2 added the in sets, settings, minutes and
// reports (keys.go); format 3 the short header of a pending job (or
// none, a bare record) and the compact body (see record.go), which a kyu
// of format 2 would take for a corrupt record.
// A store of format 2 is opened as it is and written as format 2 (long
// headers only), so a kyu of format 2 can share it still.
const formatVersion = 3

// oldestFormat is the oldest format this package opens.
const oldestFormat = 2

// Store is a kyu store in Redis, as Open and OpenURL return it: a
// backend.Backend whose every method checks its input first
// (backend.Checked).
type Store struct {
	backend.Backend
	unchecked
}

// unchecked is the store behind the checks. Embedded, it lends Store its
// state and helpers (for the package's tests), never its Backend methods,
// which the checked Backend shadows.
type unchecked struct{ *store }

// store implements backend.Backend on input that backend.Checked has
// checked.
type store struct {
	opts   Options
	log    *slog.Logger
	client rueidis.Client
	keys   keys
	// scripts are the Lua scripts, built by Open (loadScripts).
	scripts *scripts
	// keyLists keeps each queue's KEYS for script calls (keysOf).
	keyLists keyLists
	queues   *registry
	notify   *notifier // wake-ups
	finish   *notifier // ends of jobs

	// clientOpt is what client was made from; the Pub/Sub client is made
	// from it too. subClient holds the subscriptions once one started
	// (pubsubClient); subMu guards it.
	clientOpt rueidis.ClientOption
	// spin dials every connection of the clients made from clientOpt:
	// calls that read their reply in the caller's goroutine poll for it
	// briefly (spinconn.go).
	spin      *spinDialer
	subMu     sync.Mutex
	subClient rueidis.Client

	// short is set when the store's marker says format 3 or later: new
	// pending jobs get the short header (record.go). Set by Open.
	short bool

	// noFunctions is set once the server refused the function library:
	// scripts then run by EVALSHA. loadMu serialises loading it.
	noFunctions atomic.Bool
	loadMu      sync.Mutex
	// lines coalesces concurrent single-job enqueues (coalesce.go), whose
	// runs go on connections of their own (runConns, runconn.go).
	lines    lines
	runConns runConns
	// handoffs are the waiting claims an enqueue may fill (handoff.go).
	handoffs handoffs
	// fullComplete holds the numbers of the queues whose "complete
	// plain" replied -2 (a retention override for completed jobs): their
	// completions go to complete.lua at once (see Complete).
	fullComplete sync.Map
	// kept holds the subscriptions of waiting claims filled with their
	// queue's last jobs, for the next waiting claim of the same worker
	// and queues (waitclaim.go).
	kept keptWaits

	// ops counts calls in flight, so Close waits for them.
	ops    sync.WaitGroup
	mu     sync.Mutex
	closed atomic.Bool
	// done is closed by Close; retries and background loops stop on it.
	done chan struct{}
}

var _ backend.Backend = (*store)(nil)

// keysOf is the keys of queue num that the per-queue script sc takes,
// as its calls pass them (sc.keys); the list is shared and must not be
// changed.
func (s *store) keysOf(sc *script, num uint32) []string {
	kl := s.keyLists.of(s.keys, num, s.scripts.enqueue.slots, s.scripts.enqueueJID.slots, s.scripts.enqueueLean.slots, s.scripts.enqueueClaim.slots)
	switch {
	case sc.slots == nil:
		return kl.all
	case sc == s.scripts.enqueue:
		return kl.enqueue
	case sc == s.scripts.enqueueJID:
		return kl.enqueueJID
	case sc == s.scripts.enqueueLean:
		return kl.enqueueLean
	case sc == s.scripts.enqueueClaim, sc == s.scripts.claimLean, sc == s.scripts.claimPlain:
		// The three take the same keys.
		return kl.enqueueClaim
	}
	return slotKeys(kl.all, sc.slots)
}

// OpenURL opens the store a redis://, rediss://, redis-cluster:// or
// redis-sentinel:// URL names (see ParseURL). opts supplies what a URL
// does not say (Logger, RetryFor, DialTimeout).
func OpenURL(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	o, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o.Logger, o.RetryFor, o.DialTimeout = opts.Logger, opts.RetryFor, opts.DialTimeout
	return Open(ctx, o)
}

// Open connects to Redis, checks that the key prefix is kyu's (marking it
// when it is unused) and returns the store.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	scripts, err := loadScripts()
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: %w", err)
	}
	if !validPrefix(opts.Prefix) {
		return nil, fmt.Errorf("%w: prefix %q is not 1-64 characters of [A-Za-z0-9._-]", ErrBadURL, opts.Prefix)
	}
	spin := &spinDialer{}
	co := rueidis.ClientOption{
		InitAddress:       opts.Addrs,
		Username:          opts.Username,
		Password:          opts.Password,
		SelectDB:          opts.DB,
		TLSConfig:         opts.TLS,
		DisableCache:      true,
		ForceSingleClient: !opts.Cluster && opts.SentinelMaster == "",
		ClientName:        "kyu",
		DialCtxFn:         spin.dial,
	}
	co.Dialer.Timeout = opts.DialTimeout
	if opts.SentinelMaster != "" {
		co.Sentinel = rueidis.SentinelOption{MasterSet: opts.SentinelMaster, Username: opts.Username, Password: opts.Password}
	}
	where := fmt.Sprintf("redis at %v", opts.Addrs)
	client, err := rueidis.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("kyu/redis: connect to %s: %w", where, explainConnect(err))
	}
	s := &store{
		opts:      opts,
		log:       opts.Logger,
		client:    client,
		clientOpt: co,
		spin:      spin,
		keys:      keys{prefix: opts.Prefix, cluster: opts.Cluster},
		scripts:   scripts,
		done:      make(chan struct{}),
	}
	s.queues = newRegistry(s)
	s.notify = newWakeNotifier(s)
	s.finish = newDoneNotifier(s)
	if err := s.checkMarker(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("kyu/redis: %s, prefix %q: %w", where, opts.Prefix, err)
	}
	s.checkEviction(ctx)
	return &Store{Backend: backend.Checked(s), unchecked: unchecked{s}}, nil
}

// checkEviction warns when the server may evict keys under memory
// pressure: an evicted job is a lost job. Servers that refuse CONFIG (many
// managed ones) are not checked.
func (s *store) checkEviction(ctx context.Context) {
	m, err := s.client.Do(ctx, s.client.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	if err != nil {
		return
	}
	if p, ok := m["maxmemory-policy"]; ok && p != "noeviction" {
		s.log.Warn("redis may evict keys when it runs out of memory, which loses jobs; set maxmemory-policy noeviction", "maxmemory-policy", p)
	}
}

// explainConnect names the usual reasons a connection is refused.
func explainConnect(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "ERR AUTH"), strings.HasPrefix(msg, "ERR invalid password"):
			return fmt.Errorf("authentication failed (wrong user or password): %w", err)
		}
		return err
	}
	var ne net.Error
	if !errors.As(err, &ne) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("the server does not speak the Redis protocol (is it a Redis server?): %w", err)
	}
	return err
}

// checkMarker runs the marker script: a prefix is kyu's only if its marker says so.
func (s *store) checkMarker(ctx context.Context) error {
	var out string
	err := s.retry(ctx, func(int) error {
		var err error
		out, err = s.eval(ctx, s.scripts.marker, s.scripts.marker.storeKeys(s.keys), []string{strconv.Itoa(formatVersion)}).ToString()
		return err
	})
	if err != nil {
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "ERR unknown command") {
			return fmt.Errorf("the server does not run Lua scripts (is it Redis 7 or later?): %w", err)
		}
		return fmt.Errorf("check the prefix marker: %w", err)
	}
	switch {
	case out == "new":
		s.log.Info("marked a new kyu store", "prefix", s.opts.Prefix)
		s.short = true
		return nil
	case strings.HasPrefix(out, "v:"):
		v, err := strconv.Atoi(out[2:])
		if err != nil {
			return fmt.Errorf("%w: marker %s holds version %q", ErrPrefixInUse, s.keys.meta(), out[2:])
		}
		switch {
		case v > formatVersion:
			return fmt.Errorf("%w: format %d, this kyu reads %d to %d", ErrNewerFormat, v, oldestFormat, formatVersion)
		case v < oldestFormat:
			return fmt.Errorf("%w: format %d, this kyu reads %d to %d; finish its jobs with the kyu that wrote it, or remove its keys", ErrOlderFormat, v, oldestFormat, formatVersion)
		}
		s.short = v >= 3
		return nil
	default:
		return fmt.Errorf("%w: %s is %s", ErrPrefixInUse, s.keys.meta(), out[len("foreign:"):])
	}
}

// RunsFunctions reports whether the store runs its scripts as functions
// of its Redis Functions library (FCALL). It is false once the server has
// refused to load the library (as it would at Open): the scripts then run
// by EVALSHA, at about 14% more Redis instructions per job, and the store
// has logged a warning saying why.
func (s *Store) RunsFunctions() bool { return !s.noFunctions.Load() }

// enter starts a call; it fails once the store is closed.
func (s *store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return backend.ErrClosed
	}
	s.ops.Add(1)
	return nil
}

func (s *store) leave() { s.ops.Done() }

// Close waits for calls in flight, stops the subscriptions and closes the
// connections. Calls after Close return backend.ErrClosed, and so does a
// Subscribe or WatchFinished in flight that had not yet registered when
// Close began: no subscription loop runs once Close returns. A second
// Close does nothing.
func (s *store) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	close(s.done)
	s.mu.Unlock()
	s.notify.stop()
	s.finish.stop()
	s.ops.Wait()
	s.kept.close()
	s.runConns.close()
	s.subMu.Lock()
	if s.subClient != nil {
		s.subClient.Close()
	}
	s.subMu.Unlock()
	s.client.Close()
	return nil
}

// pubsubClient is the client of the Pub/Sub subscriptions (notify.go),
// made from the shared client's options when the first one starts: its
// connections send subscriptions and nothing else. The shared client's
// connections run MULTI blocks of scripts that publish on the store's
// own channels (runEnqueue), and before Redis 7.2 a message published
// inside MULTI to a channel the sending RESP3 connection is subscribed
// to is written inside the EXEC reply, which breaks the reply and makes
// rueidis panic. Its subscriptions are not retried by rueidis, which
// would subscribe again without a word: the notifier's loop must learn of
// a lost connection, to signal what it may have missed. After Close it
// fails with backend.ErrClosed.
func (s *store) pubsubClient() (rueidis.Client, error) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if s.closed.Load() {
		return nil, backend.ErrClosed
	}
	if s.subClient == nil {
		co := s.clientOpt
		co.DisableRetry = true
		c, err := rueidis.NewClient(co)
		if err != nil {
			return nil, fmt.Errorf("kyu/redis: connect for pub/sub: %w", explainConnect(err))
		}
		s.subClient = c
	}
	return s.subClient, nil
}

// errClosing reports whether err comes from a client being closed.
func errClosing(err error) bool {
	return errors.Is(err, rueidis.ErrClosing)
}
