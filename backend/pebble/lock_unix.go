//go:build unix

package pebble

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// lockDiskDir locks dir on the real disk with flock(2) on lockFile and writes
// this process's pid and host into it. flock locks belong to the open file,
// so a second Open in the same process is refused as well.
func lockDiskDir(dir string) (io.Closer, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kyu/pebble: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by %s", ErrLocked, dir, describeHolder(b))
		}
		return nil, fmt.Errorf("kyu/pebble: lock %s: %w", path, err)
	}
	info := []byte(holderInfo())
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(info, 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("kyu/pebble: write lock file: %w", err)
		}
	}
	return flockFile{f}, nil
}

// flockFile unlocks before it closes. Closing alone is not enough: a child
// forked by this process (exec.Command) shares the open file until its exec,
// and the lock would live on in it for that moment.
type flockFile struct{ f *os.File }

func (l flockFile) Close() error {
	uerr := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if err := l.f.Close(); err != nil {
		return err
	}
	return uerr
}
