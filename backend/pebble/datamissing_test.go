package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// TestOpenWipedData empties the data directory of a store that had
// acknowledged writes: Open refuses it with ErrDataMissing, saying how to
// start anyway, until AcceptDataLoss opens it empty; from then on it
// opens as usual.
func TestOpenWipedData(t *testing.T) {
	t.Parallel()
	for _, remove := range []string{"contents", "directory"} {
		dir := t.TempDir()
		s := openStore(t, dir, Options{})
		enqueue(t, s, t0, backend.NewJob{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, dataDir)
		if remove == "directory" {
			if err := os.RemoveAll(data); err != nil {
				t.Fatal(err)
			}
		} else {
			entries, err := os.ReadDir(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}

		_, err := Open(dir, Options{})
		if !errors.Is(err, ErrDataMissing) || !strings.Contains(err.Error(), "accept_data_loss=1") {
			t.Fatalf("Open after removing the data %s = %v; want ErrDataMissing naming accept_data_loss", remove, err)
		}
		if _, err := os.Stat(data); remove == "directory" && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused Open created %s (%v)", data, err)
		}
		s, err = Open(dir, Options{AcceptDataLoss: true})
		if err != nil {
			t.Fatalf("Open with AcceptDataLoss: %v", err)
		}
		if got := claim(t, s, t0, 10); len(got) != 0 {
			t.Fatalf("claimed %d jobs from a wiped store", len(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openStore(t, dir, Options{})
		_ = s.Close()
	}
}

// TestOpenOlderData puts back an older copy of the data directory, which
// lacks writes acknowledged since: Open refuses it with ErrDataMissing.
func TestOpenOlderData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	enqueue(t, s, t0, backend.NewJob{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, dataDir)
	old := filepath.Join(t.TempDir(), "old")
	if err := os.CopyFS(old, os.DirFS(data)); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	enqueue(t, s, t0, backend.NewJob{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(data, os.DirFS(old)); err != nil {
		t.Fatal(err)
	}

	if _, err := Open(dir, Options{}); !errors.Is(err, ErrDataMissing) {
		t.Fatalf("Open over an older copy of the data = %v; want ErrDataMissing", err)
	}
	s, err := Open(dir, Options{AcceptDataLoss: true})
	if err != nil {
		t.Fatalf("Open with AcceptDataLoss: %v", err)
	}
	if got := claim(t, s, t0, 10); len(got) != 1 {
		t.Fatalf("claimed %d jobs from the older copy; want its 1", len(got))
	}
	_ = s.Close()
}

// TestPowerLossKeepsOpening takes crash clones (which keep only what was
// synced, and part of the rest) while writers run and the marker records
// durable commits: each clone opens, since a power loss takes back only
// writes that were not acknowledged.
func TestPowerLossKeepsOpening(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	s := openStore(t, "/kyu", Options{FS: fs})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = s.Enqueue(ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: "t"}}, Now: t0})
			}
		})
	}
	// Wait until the marker records commits, and then until it records
	// more, so that clones are taken while the marker moves.
	waitMarked := func(above uint64) uint64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, n, err := readMarkerSynced(fs, "/kyu")
			if err != nil {
				t.Fatal(err)
			}
			if n > above {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("the marker still records %d durable commits", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	marked := waitMarked(0)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 4 {
		if i == 2 {
			marked = waitMarked(marked)
		}
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50 * (i % 2), RNG: rng})
		r, err := Open("/kyu", Options{FS: clone})
		if err != nil {
			t.Fatalf("clone %d (marker at %d or later): %v", i, marked, err)
		}
		_ = r.Close()
	}
}
