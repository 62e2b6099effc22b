//go:build !unix

package pebble

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockDiskDir falls back to the file system's own lock where flock(2) is
// not available.
func lockDiskDir(dir string) (io.Closer, error) {
	return lockMemDir(vfs.Default, dir)
}
