// Package pebble is kyu's embedded durable store, built on Pebble (an LSM
// key-value engine). It implements backend.Backend for one process at a
// time: the directory is locked while a Store has it open.
//
// Every enqueue and state change is fsynced before it is acknowledged.
// Writers share fsyncs (group commit): an operation applies its change to
// the in-memory indexes and queues its writes under the store's mutex, then
// waits while one committer goroutine writes everything queued as one
// Pebble batch with one sync.
//
// The indexes that Claim and the maintenance steps need (ready jobs per
// queue, timers, leases, deadlines, unique keys) are kept in memory and
// rebuilt by one scan when the store opens; they hold ids and times,
// never payloads, and records only of active jobs (as many as the leases
// workers hold), so a million pending jobs cost a few tens of megabytes.
// Every job's id is also in one ordered set per queue and state
// (idset.go), moved in the same step as its state: List pages through
// them in id order, Purge and RetryQueue take the oldest from them, and
// their sizes are Stats' exact counts. The order in which retention
// deletes final jobs is kept in Pebble instead (retention.go), written
// with their records. Queue settings, the per-minute counters and the
// worker registry are small and kept in memory too; log lines are read
// from storage only by Get.
package pebble

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// Store is an embedded kyu store in one directory, as Open returns it: a
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
	dir  string
	fs   vfs.FS
	opts Options
	log  *slog.Logger
	db   *cpebble.DB
	lock io.Closer
	// fault holds a failure Pebble reported from inside itself; the
	// first operation to see it breaks the store (lockState).
	fault *engineFault
	// trim returns the C heap's free memory once Pebble deleted tables.
	trim *cTrimmer

	// closeMu is held shared by every operation for its whole run and
	// exclusively by Close, so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	// mu guards everything below, and the order of writes: an operation
	// queues its writes while holding mu, so Pebble sees the writes to one
	// key in the order the indexes saw them.
	mu  sync.Mutex
	idx *indexes
	// dirty holds the records whose writes are queued or being committed;
	// reads look here before Pebble.
	dirty map[jobID]dirtyEntry
	// jids holds the JID keys whose writes are queued or being committed
	// (jids.go); lookups look here before Pebble.
	jids map[string]jidEntry
	ver  uint64
	// writes counts the writes queued (every one goes through group), so
	// a section can tell whether it wrote anything (groupSince).
	writes uint64
	// pending collects the writes of operations since the committer last
	// took a group; nil when there are none.
	pending *commitGroup
	// committing is the group the committer is writing, until it is
	// durable; nil between groups.
	committing *commitGroup
	commitCond *sync.Cond
	// callCommitter is set when the current section under mu started a
	// group: the section's end wakes the committer for it (woken at the
	// group's first write, the committer would only wait for mu, and be
	// woken again when the section released it).
	callCommitter bool
	// sectionWrites is s.writes when the current section under mu began;
	// lastSections is the sections count of the last group committed.
	sectionWrites uint64
	lastSections  int
	// left counts the sections under mu that have ended (see entered).
	left uint64
	// waitLeft, when not zero, is the count of left the committer waits
	// for before it takes the pending group.
	waitLeft uint64
	// ids makes the ids of new jobs (idsource.go); it has a mutex of its
	// own.
	ids *idSource
	// waiting holds the claims waiting for work (waitclaim.go).
	waiting  waitingClaims
	stopping bool
	// broken is set when a read or a commit failed; every later operation
	// returns it, since memory and disk may disagree.
	broken error
	buf    []byte
	// sweep is where ApplyRetention goes on walking the retention index.
	sweep retentionSweep
	// records reads job records for the section under mu; see unlock.
	records pointReader
	// payloads reads the payloads of claimed jobs (payloadreader.go);
	// it has a mutex of its own.
	payloads payloadReader

	// names holds the names the records read under mu share.
	names nameCache
	// pre holds the records read ahead for the next claim (prefetch.go).
	pre prefetcher
	// spareDirty is the list of dirty entries of a committed group,
	// emptied, which the next group fills instead of growing its own.
	spareDirty []dirtyRef
	// held are the records of jobs made pending while claims wait, not
	// yet added to the pending group's batch (see put).
	held []dirtyRef

	committerDone chan struct{}

	// commits counts the groups taken for commit, under mu; each writes
	// its number under the prefixCommits key. synced is the number of the
	// last durable one. markLoop records synced in the marker file
	// (marked is the value it recorded last) when markWake says it grew,
	// until markStop; markDone closes when it has stopped.
	commits uint64
	// ownCommits counts, under mu, the groups an operation committed
	// itself (unlockWait).
	ownCommits uint64
	// claimReads counts, under mu, the records claims read from Pebble
	// under mu (loadPending): those neither in memory nor read ahead.
	claimReads uint64
	synced     atomic.Uint64
	marked     uint64
	markWake   chan struct{}
	markStop   chan struct{}
	markDone   chan struct{}

	// entered counts the sections under mu that have begun or are waiting
	// for mu (lockState). The committer, before it takes a group, waits
	// until as many have ended: operations already at the door then add
	// their writes to the group instead of waiting for a sync of their own.
	entered atomic.Uint64

	// leaders holds the Leader leases (leader.go).
	leaders leaders

	subsMu sync.Mutex
	subs   map[string]map[*subscriber]struct{}
	// watchers holds the WatchFinished subscribers per job; watching
	// counts their entries, so state changes skip the bookkeeping while
	// nobody watches.
	watchers map[jobID]map[*subscriber]struct{}
	watching atomic.Int64

	// counters are the processed/failed counts (stats.go); workers the
	// registry (workers.go). Both under mu.
	counters counters
	workers  map[string]*backend.WorkerInfo
}

var _ backend.Backend = (*store)(nil)

// Open opens the store in dir, creating it if dir is absent or empty.
//
// It refuses, changing nothing, a directory that is not empty and not a kyu
// store (ErrNotStore), a store written by a newer kyu (ErrNewerFormat) and a
// store another Store holds (ErrLocked, naming the holder's pid and host).
// Damaged data files give ErrCorrupt; data files that lack writes the
// store had acknowledged (an emptied data directory, an older copy) give
// ErrDataMissing, unless Options.AcceptDataLoss.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	fs := opts.FS
	onDisk := fs == nil
	if onDisk {
		fs = vfs.Default
	}
	if _, err := inspectDir(fs, dir); err != nil {
		return nil, err
	}
	if err := mkdirDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("kyu/pebble: create %s: %w", dir, err)
	}
	var lock io.Closer
	var err error
	if onDisk {
		lock, err = lockDiskDir(dir)
	} else {
		lock, err = lockMemDir(fs, dir)
	}
	if err != nil {
		return nil, err
	}
	s, err := open(fs, dir, opts, lock)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return &Store{Backend: backend.Checked(s), unchecked: unchecked{s}}, nil
}

// open does the work of Open once the directory is locked.
func open(fs vfs.FS, dir string, opts Options, lock io.Closer) (s *store, err error) {
	kind, err := inspectDir(fs, dir)
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With("store", dir)
	var marked uint64
	if kind == dirStore {
		v, synced, err := readMarkerSynced(fs, dir)
		if err != nil {
			return nil, err
		}
		marked = synced
		if err := checkDataPresent(fs, dir, marked, opts.AcceptDataLoss, log); err != nil {
			return nil, err
		}
		if v < formatVersion {
			if err := writeMarker(fs, dir, marked); err != nil {
				return nil, err
			}
		}
	} else if err := writeMarker(fs, dir, 0); err != nil {
		return nil, err
	}

	fault := newEngineFault(log)
	trim := &cTrimmer{}
	db, err := openPebble(fs, fs.PathJoin(dir, dataDir), opts, fault, trim)
	if err != nil {
		return nil, err
	}
	s = &store{
		dir:           dir,
		fs:            fs,
		opts:          opts,
		log:           log,
		db:            db,
		lock:          lock,
		fault:         fault,
		trim:          trim,
		idx:           newIndexes(),
		dirty:         make(map[jobID]dirtyEntry),
		jids:          make(map[string]jidEntry),
		committerDone: make(chan struct{}),
		subs:          make(map[string]map[*subscriber]struct{}),
		watchers:      make(map[jobID]map[*subscriber]struct{}),
		counters:      newCounters(),
		workers:       make(map[string]*backend.WorkerInfo),
		marked:        marked,
		markWake:      make(chan struct{}, 1),
		markStop:      make(chan struct{}),
		markDone:      make(chan struct{}),
		sweep:         newRetentionSweep(),
		ids:           newSystemIDSource(),
	}
	s.commitCond = sync.NewCond(&s.mu)
	s.records = pointReader{db: db, prefix: prefixJob}
	s.payloads.r = pointReader{db: db, prefix: prefixPayload}
	s.payloads.maxAge = payloadReaderAge
	moved, err := movePayloads(db)
	if moved > 0 {
		log.Info("moved payloads to the format 4 layout", "payloads", moved)
	}
	var jidRecords int
	if err == nil {
		jidRecords, err = s.rebuild()
	}
	if err == nil {
		err = s.checkCommits()
	}
	if err == nil {
		err = s.checkJIDs(jidRecords)
	}
	if ferr := fault.failed(); ferr != nil {
		err = ferr
	}
	if err != nil {
		_ = closePebble(db)
		return nil, err
	}
	go s.commitLoop()
	go s.markLoop()
	return s, nil
}

// openPebble opens the engine, turning a panic on damaged files into an
// error. It returns once Pebble has opened every table (to load its
// statistics), so a damaged table, whichever keys it holds, fails the
// open with ErrCorrupt instead of breaking the store soon after.
func openPebble(fs vfs.FS, dir string, opts Options, fault *engineFault, trim *cTrimmer) (db *cpebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %s: opening the data files failed: %v", ErrCorrupt, dir, r)
		}
	}()
	cache := cpebble.NewCache(blockCacheSize(opts))
	defer cache.Unref()
	statsLoaded := make(chan struct{})
	// A background error while Open waits for the statistics (a table it
	// cannot read) fails the open, which would otherwise wait for ever.
	bgErr := make(chan error, 1)
	po := &cpebble.Options{
		FS:                 walZeroFS{fs},
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: cpebble.FormatNewest,
		Logger:             pebbleLogger{l: opts.Logger, fault: fault},
		EventListener: &cpebble.EventListener{
			DataCorruption: fault.dataCorruption,
			BackgroundError: func(err error) {
				fault.backgroundError(err)
				select {
				case bgErr <- err:
				default:
				}
			},
			TableStatsLoaded: func(cpebble.TableStatsInfo) { close(statsLoaded) },
			// A deleted table's blocks left the block cache.
			TableDeleted: func(cpebble.TableDeleteInfo) { trim.note() },
		},
	}
	// A claim reads the records of the pending jobs it pops, which sit
	// side by side in id order, and every block read is a pread and an
	// allocation in the block cache: see tableBlockSize.
	po.Levels[0].BlockSize = tableBlockSize
	db, err = cpebble.Open(dir, po)
	if ferr := fault.failed(); ferr != nil {
		if err == nil {
			_ = closePebble(db)
		}
		return nil, ferr
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: opening the data files failed: %w", ErrCorrupt, dir, err)
	}
	select {
	case <-statsLoaded:
	case <-fault.fired:
		_ = closePebble(db)
		return nil, fault.failed()
	case err := <-bgErr:
		_ = closePebble(db)
		if ferr := fault.failed(); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("kyu/pebble: %s: reading the data files failed: %w", dir, err)
	}
	return db, nil
}

// tableBlockSize is the size of the blocks Pebble writes its tables in,
// at every level (the others take L0's), instead of Pebble's 4 KiB: a
// drain reads its jobs' records in id order, block by block, and four
// times bigger blocks take it four times fewer block reads
// (BenchmarkDrainNoop: the reads' CPU falls from about 2.4 µs a job to
// 1.8; 32 KiB gave 1.4 but left the memory test nearer its bar). A
// point read that misses the block cache reads and decompresses the
// bigger block.
const tableBlockSize = 16 << 10

// blockCacheFloor is the least room the block cache keeps for blocks
// while Pebble holds two full memtables, which it counts against the
// cache: see blockCacheSize.
const blockCacheFloor = 2 << 20

// blockCacheSize is the size the store gives Pebble's block cache:
// Options.CacheSize, but at least two memtables and blockCacheFloor.
// Pebble reserves the size of every memtable it holds in the cache, so
// with two full 32 MiB memtables a 64 MiB cache had no room left for
// blocks: a drain of jobs in tables read the index and data blocks of
// every claim from the files again, 0.17 block reads a job instead of
// 0.03 (BenchmarkDrainFlushed, where that cost about 1.6 µs of CPU a
// job). A floor of 1 to 8 MiB read as few blocks.
func blockCacheSize(opts Options) int64 {
	return max(opts.CacheSize, 2*int64(opts.MemTableSize)+blockCacheFloor)
}

func closePebble(db *cpebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kyu/pebble: close: %v", r)
		}
	}()
	return db.Close()
}

// Close flushes queued writes, stops the committer, closes Pebble and
// releases the directory. Later calls, and calls of any method after it,
// return backend.ErrClosed.
func (s *store) Close() error {
	// A waiting claim holds its operation open: end it first.
	s.closeWaiting()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return backend.ErrClosed
	}
	s.closed = true
	s.mu.Lock()
	s.stopping = true
	s.commitCond.Signal()
	s.mu.Unlock()
	<-s.committerDone
	close(s.markStop)
	<-s.markDone
	err := s.recordSynced()
	s.payloads.stop()
	if cerr := closePebble(s.db); err == nil {
		err = cerr
	}
	s.trim.stop()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("kyu/pebble: close %s: %w", s.dir, err)
	}
	return nil
}

// begin starts an operation: it holds closeMu shared until end is called.
func (s *store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return backend.ErrClosed
	}
	return nil
}

func (s *store) end() { s.closeMu.RUnlock() }

// lockState takes mu and reports a broken store.
func (s *store) lockState() error {
	s.entered.Add(1)
	s.mu.Lock()
	s.sectionWrites = s.writes
	if s.broken == nil {
		if err := s.fault.failed(); err != nil {
			_ = s.breakStore(err)
		}
	}
	if s.broken != nil {
		err := s.broken
		s.unlock()
		return err
	}
	return nil
}

// lockSettled takes mu (as lockState does) once job id has no write in
// flight, waiting for such writes first, so what the caller reads of the
// job under mu is durable.
func (s *store) lockSettled(id jobID) error {
	for {
		if err := s.lockState(); err != nil {
			return err
		}
		e, ok := s.dirty[id]
		if !ok {
			return nil
		}
		g := e.group
		s.unlock()
		if err := wait(g); err != nil {
			return err
		}
	}
}

// breakStore records a storage failure; mu must be held.
func (s *store) breakStore(err error) error {
	if s.broken == nil {
		s.broken = fmt.Errorf("kyu/pebble: store %s failed and must be reopened: %w", s.dir, err)
		s.log.Error("store failed", "err", err)
	}
	return s.broken
}
