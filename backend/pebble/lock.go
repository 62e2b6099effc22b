package pebble

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Files of a store directory beside Pebble's own (which live in dataDir).
const (
	lockFile   = "kyu.lock"  // locked while a Store has the directory open
	ownerFile  = "kyu.owner" // the holder, on file systems other than the disk
	markerFile = "KYU"       // names the directory a kyu store and its format
	markerTemp = "KYU.tmp"   // the marker while it is written (layout.go)
	dataDir    = "data"      // Pebble's directory
)

// holderInfo describes this process for the lock file.
func holderInfo() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// describeHolder turns a lock file's content into words for an error.
func describeHolder(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "another process (holder unknown)"
	}
	return s
}

// lockMemDir locks dir on a file system other than the real disk, using the
// file system's own Lock (which, for vfs.MemFS, excludes other Stores in
// this process) and recording the holder in ownerFile.
func lockMemDir(fs vfs.FS, dir string) (io.Closer, error) {
	c, err := fs.Lock(fs.PathJoin(dir, lockFile))
	if err != nil {
		holder := "another process (holder unknown)"
		if f, oerr := fs.Open(fs.PathJoin(dir, ownerFile)); oerr == nil {
			b, _ := io.ReadAll(io.LimitReader(f, 4096))
			_ = f.Close()
			holder = describeHolder(b)
		}
		return nil, fmt.Errorf("%w: %s is in use by %s (%v)", ErrLocked, dir, holder, err)
	}
	f, err := fs.Create(fs.PathJoin(dir, ownerFile), vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write([]byte(holderInfo()))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("kyu/pebble: write %s: %w", ownerFile, err)
	}
	return c, nil
}
