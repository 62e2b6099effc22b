package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// markInterval is the least time between two marker writes while the
// store runs; each costs two syncs.
const markInterval = time.Second

// acceptHint tells, in the errors of a refused Open, how to open dir
// anyway.
func acceptHint(dir string) string {
	return fmt.Sprintf("to start anyway with the data that is there, set Options.AcceptDataLoss (in a URL, pebble://%s?accept_data_loss=1)", dir)
}

// checkDataPresent refuses, before Pebble creates anything, a store whose
// marker records durable commits but whose data directory is absent or
// empty: the data was wiped.
func checkDataPresent(fs vfs.FS, dir string, marked uint64, accept bool, log *slog.Logger) error {
	if marked == 0 {
		return nil
	}
	missing, err := dataMissing(fs, dir)
	if err != nil || !missing {
		return err
	}
	what := fmt.Sprintf("the data directory %s is empty or absent, but the store had made %d commits durable", fs.PathJoin(dir, dataDir), marked)
	if !accept {
		return fmt.Errorf("%w: %s: %s; %s", ErrDataMissing, dir, what, acceptHint(dir))
	}
	log.Warn("opening a store that lost its data (AcceptDataLoss): " + what)
	return nil
}

// checkCommits reads the number of committed groups from the data files
// and refuses the store when it is below the count the marker records:
// acknowledged writes are missing. With AcceptDataLoss it records the
// count found instead, so later opens take it as the baseline.
func (s *store) checkCommits() error {
	v, closer, err := s.db.Get([]byte{prefixCommits})
	switch {
	case errors.Is(err, cpebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("%w: %s: read the commit count: %w", ErrCorrupt, s.dir, err)
	default:
		n, k := binary.Uvarint(v)
		_ = closer.Close()
		if k <= 0 {
			return fmt.Errorf("%w: %s: bad commit count", ErrCorrupt, s.dir)
		}
		s.commits = n
	}
	s.synced.Store(s.commits)
	if s.commits >= s.marked {
		return nil
	}
	what := fmt.Sprintf("the data files hold %d commits, but the store had made %d durable: "+
		"acknowledged writes are missing (was the data directory replaced or restored from an older copy?)", s.commits, s.marked)
	if !s.opts.AcceptDataLoss {
		return fmt.Errorf("%w: %s: %s; %s", ErrDataMissing, s.dir, what, acceptHint(s.dir))
	}
	s.log.Warn("opening a store that lost acknowledged writes (AcceptDataLoss): " + what)
	if err := writeMarker(s.fs, s.dir, s.commits); err != nil {
		return err
	}
	s.marked = s.commits
	return nil
}

// markLoop records in the marker the count of durable commits soon after
// a commit, then at most once per markInterval, until Close.
func (s *store) markLoop() {
	defer close(s.markDone)
	for {
		select {
		case <-s.markWake:
		case <-s.markStop:
			return
		}
		if err := s.recordSynced(); err != nil {
			s.log.Warn("could not record the durable commits in the marker", "err", err)
		}
		t := time.NewTimer(markInterval)
		select {
		case <-t.C:
		case <-s.markStop:
			t.Stop()
			return
		}
	}
}

// recordSynced writes the count of durable commits to the marker when it
// grew; only markLoop, and Close once markLoop has stopped, call it.
func (s *store) recordSynced() error {
	n := s.synced.Load()
	if n <= s.marked {
		return nil
	}
	if err := writeMarker(s.fs, s.dir, n); err != nil {
		return err
	}
	s.marked = n
	return nil
}
