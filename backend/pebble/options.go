package pebble

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// FS is the file system the store lives on. Nil means the real disk,
	// where the directory is locked with flock(2). Tests pass a crashable
	// in-memory FS (vfs.NewCrashableMem).
	FS vfs.FS

	// Logger receives the store's and Pebble's log lines. Nil discards them.
	Logger *slog.Logger

	// CacheSize is Pebble's block cache in bytes. Zero means 64 MiB. Claims
	// and completions read the records of recent jobs, so a cache that
	// holds them matters more than anything else for throughput. It is
	// the most the cache holds; it fills as tables are read (a reopen's
	// scan of a million pending jobs leaves some 40 MiB in it), and a
	// compaction's deleted tables leave it (their memory is given back,
	// see cTrimmer). Pebble counts the memtables it holds against the
	// cache, so the store makes it at least two memtables and 2 MiB (66
	// MiB with the defaults): while both memtables are full, blocks keep
	// that 2 MiB.
	CacheSize int64

	// MemTableSize is the size of one Pebble memtable in bytes. Zero means
	// 32 MiB. Once writes have filled one, the store holds two: the one
	// being written and one flushing or kept for reuse, so twice this
	// stays resident. At 32 MiB a million pending jobs take about 190-230
	// MiB of RSS (TestMemoryMillion); 64 MiB take 64 MiB more, and spend
	// about 15 % less CPU per job claimed and completed under a sustained
	// drain (BenchmarkClaimComplete), since more of a job's writes meet
	// in one memtable. A store that drains fast and can spare the memory
	// may want 64 MiB.
	MemTableSize uint64

	// AcceptDataLoss opens a store whose data files lack writes it had
	// acknowledged, which Open otherwise refuses with ErrDataMissing: the
	// marker file records, shortly after each sync and at Close, how many
	// commits were durable, and a store that recovers fewer, or whose
	// data directory is empty, lost data that was not merely in flight.
	// (Writes lost in a crash before their sync was acknowledged never
	// count.) With it, Open logs what is missing, takes the data files as
	// they are and records their state as the new baseline. In a backend
	// URL: pebble:///path?accept_data_loss=1.
	AcceptDataLoss bool

	// MaintenanceLimit bounds one Promote, RecoverLeases or ApplyRetention
	// step called with Limit 0. Zero means 1000.
	MaintenanceLimit int
}

// Defaults for Options.
const (
	DefaultCacheSize        = 64 << 20
	DefaultMemTableSize     = 32 << 20
	DefaultMaintenanceLimit = 1000
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.MaintenanceLimit <= 0 {
		o.MaintenanceLimit = DefaultMaintenanceLimit
	}
	return o
}
