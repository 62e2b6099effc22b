package pebble

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kyuhq/kyu/backend"
)

// syncGateFS holds back the syncs of Pebble's write-ahead log while it is
// closed, so a test can look at the store while a commit is written but
// not yet durable.
type syncGateFS struct {
	vfs.FS
	mu      sync.Mutex
	closed  bool
	blocked chan struct{} // closed when a sync first waits at the gate
	open    chan struct{} // closed when the gate opens
}

// close makes the next log syncs wait until reopen.
func (g *syncGateFS) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.blocked = make(chan struct{})
	g.open = make(chan struct{})
}

// reopen lets the held syncs through.
func (g *syncGateFS) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

func (g *syncGateFS) pass() {
	g.mu.Lock()
	if !g.closed {
		g.mu.Unlock()
		return
	}
	select {
	case <-g.blocked:
	default:
		close(g.blocked)
	}
	open := g.open
	g.mu.Unlock()
	<-open
}

func (g *syncGateFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return gatedFile{File: f, gate: g}, nil
}

func (g *syncGateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(name, f, err)
}

func (g *syncGateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(newname, f, err)
}

func (g *syncGateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, opts...)
	return g.wrap(name, f, err)
}

type gatedFile struct {
	vfs.File
	gate *syncGateFS
}

func (f gatedFile) Sync() error {
	f.gate.pass()
	return f.File.Sync()
}

func (f gatedFile) SyncData() error {
	f.gate.pass()
	return f.File.SyncData()
}

func (f gatedFile) SyncTo(length int64) (bool, error) {
	f.gate.pass()
	return f.File.SyncTo(length)
}

// TestReadersSeeOnlyDurableState starts a write, holds its commit before
// the sync, and reads meanwhile: whatever the reader reports must be in
// the store reopened from a crash clone taken when the reader answers
// (which keeps only what was synced). A reader that answered from memory
// would report the write that the crash takes back.
func TestReadersSeeOnlyDurableState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	complete := func(s *Store, id string) error {
		_, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: id, Token: 1}}}, Now: t0})
		return err
	}
	type reading struct {
		what string
		// prepare, when set, runs before the commit is held; write's
		// commit is the one held.
		prepare func(s *Store, id string) error
		write   func(s *Store, id string) error
		// read reports what the reader says, in a form check compares
		// with the reopened store's answer.
		read func(s *Store, id string) (string, error)
	}
	readings := []reading{{
		what:  "Stats",
		write: complete,
		read: func(s *Store, id string) (string, error) {
			st, err := s.Stats(ctx, backend.StatsParams{Now: t0, Minutes: 1})
			q := findQueueOrZero(st, backend.DefaultQueue)
			return strings.Join([]string{
				"processed", itoa(st.Processed), "minute", itoa(st.Minutes[0].Processed),
				"active", itoa(q.Counts[backend.StateActive]), "completed", itoa(q.Counts[backend.StateCompleted]),
			}, " "), err
		},
	}, {
		what:  "Get",
		write: complete,
		read: func(s *Store, id string) (string, error) {
			j, err := s.Get(ctx, backend.GetParams{ID: id})
			if err != nil {
				return "", err
			}
			return string(j.State), nil
		},
	}, {
		what: "Complete's lost lease",
		write: func(s *Store, id string) error {
			_, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: t0.Add(2 * time.Minute)})
			return err
		},
		read: func(s *Store, id string) (string, error) {
			res, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: id, Token: 1}}}, Now: t0})
			if err != nil {
				return "", err
			}
			return fmt.Sprint(res.Errors[0]), nil
		},
	}, {
		what:    "List",
		prepare: complete,
		write: func(s *Store, id string) error {
			return s.Delete(ctx, backend.DeleteParams{ID: id, Now: t0})
		},
		read: func(s *Store, id string) (string, error) {
			res, err := s.List(ctx, backend.ListParams{Limit: 10})
			var ids []string
			for _, j := range res.Jobs {
				ids = append(ids, j.ID+":"+string(j.State))
			}
			slices.Sort(ids)
			return strings.Join(ids, " "), err
		},
	}, {
		what: "Workers",
		write: func(s *Store, id string) error {
			_, err := s.RegisterWorker(ctx, backend.RegisterWorkerParams{
				Worker:    backend.WorkerInfo{ID: "w1", Queues: []string{backend.DefaultQueue}, Concurrency: 1},
				DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: t0,
			})
			return err
		},
		read: func(s *Store, id string) (string, error) {
			ws, err := s.Workers(ctx, backend.WorkersParams{Now: t0})
			var ids []string
			for _, w := range ws {
				ids = append(ids, w.ID)
			}
			return strings.Join(ids, " "), err
		},
	}}
	for _, r := range readings {
		t.Run(r.what, func(t *testing.T) {
			t.Parallel()
			mem := vfs.NewCrashableMem()
			gate := &syncGateFS{FS: mem}
			s := openStore(t, "/kyu", Options{FS: gate})
			id := enqueue(t, s, t0, backend.NewJob{Retention: backend.RetainForever})[0].ID
			if got := claim(t, s, t0, 1); len(got) != 1 || got[0].LeaseToken != 1 {
				t.Fatalf("claim = %+v", got)
			}
			if r.prepare != nil {
				if err := r.prepare(s, id); err != nil {
					t.Fatal(err)
				}
			}

			gate.close()
			wrote := make(chan error, 1)
			go func() { wrote <- r.write(s, id) }()
			<-gate.blocked // the write is committing, not yet durable

			type answer struct {
				said string
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				said, err := r.read(s, id)
				answered <- answer{said, err}
			}()
			// A reader that waits for the sync answers once the gate
			// opens; one that does not answers at once. The gate opens
			// after a while either way, so a slow reader cannot make the
			// test fail, only pass without the sync held.
			var a answer
			select {
			case a = <-answered:
			case <-time.After(200 * time.Millisecond):
				gate.reopen()
				a = <-answered
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			gate.reopen()
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}

			re := openStore(t, "/kyu", Options{FS: crashed})
			after, err := r.read(re, id)
			if err != nil {
				t.Fatal(err)
			}
			if after != a.said {
				t.Fatalf("%s answered %q while the write was not durable; after a crash the store says %q", r.what, a.said, after)
			}
		})
	}
}

func findQueueOrZero(st backend.Stats, name string) backend.QueueInfo {
	for _, q := range st.Queues {
		if q.Name == name {
			return q
		}
	}
	return backend.QueueInfo{Counts: backend.NewCounts()}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
