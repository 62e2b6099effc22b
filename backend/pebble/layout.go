package pebble

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// formatVersion is the store format this code writes and reads: the key
// layout (keys.go) and the record encodings (encoding.go). It is recorded
// in the marker file; a store with a newer format is refused.
//
// Format 2 adds job records of encoding version 2 and the keys of queue
// settings, log lines, counters and worker entries. This code reads a
// format 1 store (its records are of version 1) and marks it format 2
// when it opens it, before writing anything, so that a kyu that knows
// only format 1 refuses it with ErrNewerFormat instead of failing on a
// record it cannot read.
//
// Format 3 adds job records of encoding version 3 (they carry the JID)
// and the JID keys. A format 1 or 2 store is read and marked format 3
// likewise; its records hold no JID, so it needs no JID keys.
//
// Format 4 moves the payloads from 'p' + id to 'x' + id (keys.go). Open
// marks an older store with the current format first, then moves its payloads
// (movePayloads), which it does at every open until none is left under
// 'p', so a move a crash cut short is finished at the next open.
//
// Format 5 adds the retention index (retention.go): keys listing final jobs
// that retention will delete, ordered by when. An older store is marked
// format 5 before anything is written, as above (a format 4 kyu would
// write final jobs without their keys), and its keys are written while
// the open scans its records; the 'e' key records that they all were, so
// an open that crashed on the way writes them again.
const formatVersion = 5

const markerHeader = "kyu store"

// The marker's optional third line, "synced N", records that N commits
// were durable (the prefixCommits key holds the count). It is written a
// moment after syncs (markLoop) and at Close, so data files that hold
// fewer commits lost acknowledged writes. A marker without it (older
// stores) records 0.
const markerSynced = "synced "

// dirKind is what Open finds in a directory.
type dirKind int

const (
	dirNew   dirKind = iota // absent, empty, or only our lock files and a half-written marker
	dirStore                // has a marker file
)

// inspectDir classifies dir without changing anything in it. A directory
// that is not empty and holds no marker is refused with ErrNotStore, unless
// it holds only our lock files and a temporary marker: an Open that
// crashed while creating the store leaves just those, and a store is
// created there again.
func inspectDir(fs vfs.FS, dir string) (dirKind, error) {
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return dirNew, nil
		}
		return 0, fmt.Errorf("kyu/pebble: read directory %s: %w", dir, err)
	}
	var foreign []string
	for _, n := range names {
		switch n {
		case markerFile:
			return dirStore, nil
		case lockFile, ownerFile, markerTemp, ".", "..":
		default:
			foreign = append(foreign, n)
		}
	}
	if len(foreign) == 0 {
		return dirNew, nil
	}
	slices.Sort(foreign)
	if len(foreign) > 3 {
		foreign = append(foreign[:3], "…")
	}
	return 0, fmt.Errorf("%w: %s is not empty and has no %s marker file (it holds %s); refusing to use it",
		ErrNotStore, dir, markerFile, strings.Join(foreign, ", "))
}

// readMarker checks the marker file of an existing store and returns its
// format version, refusing a newer format than this code knows.
func readMarker(fs vfs.FS, dir string) (int, error) {
	v, _, err := readMarkerSynced(fs, dir)
	return v, err
}

// readMarkerSynced is readMarker that also returns the count of durable
// commits the marker records.
func readMarkerSynced(fs vfs.FS, dir string) (int, uint64, error) {
	f, err := fs.Open(fs.PathJoin(dir, markerFile))
	if err != nil {
		return 0, 0, fmt.Errorf("kyu/pebble: open marker: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	_ = f.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("kyu/pebble: read marker: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	bad := fmt.Errorf("%w: %s: the %s marker file is damaged or foreign (%.40q)", ErrNotStore, dir, markerFile, b)
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != markerHeader {
		return 0, 0, bad
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(lines[1]), "format ")
	if !ok {
		return 0, 0, bad
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, 0, bad
	}
	if n > formatVersion {
		return 0, 0, fmt.Errorf("%w: %s has store format %d, but this kyu reads format %d at most; upgrade kyu",
			ErrNewerFormat, dir, n, formatVersion)
	}
	var synced uint64
	if len(lines) > 2 {
		v, ok := strings.CutPrefix(strings.TrimSpace(lines[2]), markerSynced)
		if synced, err = strconv.ParseUint(v, 10, 64); !ok || err != nil {
			return 0, 0, bad
		}
	}
	return n, synced, nil
}

// writeMarker records dir as a kyu store of the current format with
// synced durable commits, durably (write a temporary file, sync, rename,
// sync the directory). A temporary file left by a crashed Open is removed
// first.
func writeMarker(fs vfs.FS, dir string, synced uint64) error {
	tmp := fs.PathJoin(dir, markerTemp)
	if err := fs.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kyu/pebble: remove stale %s: %w", markerTemp, err)
	}
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("kyu/pebble: create marker: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s\nformat %d\n%s%d\n", markerHeader, formatVersion, markerSynced, synced)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(dir, markerFile))
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	if err != nil {
		return fmt.Errorf("kyu/pebble: write marker: %w", err)
	}
	return nil
}

// dataMissing reports whether dir's data directory is absent or holds no
// Pebble files (a LOCK file alone does not count).
func dataMissing(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.List(fs.PathJoin(dir, dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("kyu/pebble: read directory %s: %w", fs.PathJoin(dir, dataDir), err)
	}
	for _, n := range names {
		if n != "LOCK" && n != "." && n != ".." {
			return false, nil
		}
	}
	return true, nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirDurable creates dir and any missing parents, and syncs each parent
// whose entries changed, so the new directories survive a power loss.
func mkdirDurable(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	var parents []string
	for p := fs.PathDir(dir); ; p = fs.PathDir(p) {
		parents = append(parents, p)
		if fs.PathDir(p) == p {
			break
		}
		if _, err := fs.Stat(p); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range parents {
		if err := syncDir(fs, p); err != nil {
			return err
		}
	}
	return nil
}
