package move

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// ActivePolicy says what to do with jobs that are active in the source.
type ActivePolicy string

// Active policies.
const (
	// ActiveRefuse refuses to move active jobs: the source's workers run
	// them now, and would finish them in the source while the target ran
	// them again. Drain or pause the queues first. The default.
	ActiveRefuse ActivePolicy = "refuse"
	// ActivePending moves an active job as pending with its attempt kept,
	// as lease recovery would once the source's worker is gone: for a
	// source whose workers are stopped for good.
	ActivePending ActivePolicy = "pending"
)

// Filter chooses the jobs to move.
type Filter struct {
	// Queue, when set, moves one queue only.
	Queue string
	// States, when not empty, moves jobs in these states only.
	States []backend.State
}

// Options tune a move. The zero value moves everything, refusing active
// jobs, in batches of 1,000 jobs (backend.MaxImportBatch) or 4 MiB, two
// batches written at once by Copy.
type Options struct {
	Filter
	Active ActivePolicy
	// BatchJobs and BatchBytes bound one batch: what is held in memory at
	// once, and what one Import carries.
	BatchJobs  int
	BatchBytes int
	// Readers is how many jobs are read from a source at once (Get), when
	// it is not a backend.WholeLister.
	Readers int
	// Writers is how many batches Copy writes into the target at once
	// (default 2). Batches are independent, since each job is written
	// alone and a source holds no two jobs that hold one unique key. With
	// the source read while the target writes, Copy holds at most
	// Writers+1 batches. Two writers keep both cores of the machine of
	// docs/benchmarks.md busy where one left the target idle between
	// batches.
	Writers int
	// Progress, when set, is called after each batch with the jobs done
	// and the total expected (0 when unknown).
	Progress func(done, total int64)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Active == "" {
		o.Active = ActiveRefuse
	}
	if o.Active != ActiveRefuse && o.Active != ActivePending {
		return fmt.Errorf("active jobs: %q is neither refuse nor pending", o.Active)
	}
	if o.BatchJobs <= 0 || o.BatchJobs > backend.MaxImportBatch {
		o.BatchJobs = backend.MaxImportBatch
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	if o.Readers <= 0 {
		o.Readers = 16
	}
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Queue != "" && !backend.ValidQueueName(o.Queue) {
		return fmt.Errorf("queue %q is not a queue name", o.Queue)
	}
	for _, s := range o.States {
		if !s.Valid() {
			return fmt.Errorf("unknown state %q", s)
		}
	}
	return nil
}

// ActiveError refuses a move because jobs are active in the source.
type ActiveError struct {
	Count int64
	ID    string // one of them, when known
}

func (e *ActiveError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("job %s is active in the source: drain or pause its queue first, or pass --active=pending to move active jobs as pending with their attempt kept", e.ID)
	}
	return fmt.Sprintf("%d jobs are active in the source: drain or pause their queues first, or pass --active=pending to move them as pending with their attempt kept", e.Count)
}

// wants reports whether the filter takes a job in state s of queue q.
func (f Filter) wants(q string, s backend.State) bool {
	return (f.Queue == "" || f.Queue == q) && (len(f.States) == 0 || slices.Contains(f.States, s))
}

// census reads the source's queues (their settings, for the queue lines)
// and counts the jobs the filter takes, and the active ones among them.
func census(ctx context.Context, src backend.Backend, f Filter, now time.Time) (queues []QueueLine, total, active int64, err error) {
	st, err := src.Stats(ctx, backend.StatsParams{Now: now})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read the source's queues: %w", err)
	}
	for _, q := range st.Queues {
		if f.Queue != "" && q.Name != f.Queue {
			continue
		}
		queues = append(queues, QueueLine{Kind: KindQueue, Name: q.Name, Paused: q.Settings.Paused, Retention: q.Settings.Retention})
		for s, n := range q.Counts {
			if f.wants(q.Name, s) {
				total += n
				if s == backend.StateActive {
					active += n
				}
			}
		}
	}
	slices.SortFunc(queues, func(a, b QueueLine) int { return compareStrings(a.Name, b.Name) })
	return queues, total, active, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readJobs lists the jobs the filter takes, in id order (state by state
// when states are named), reads each whole (with the page when the source
// is a backend.WholeLister, else by Get, Readers at a time) and hands
// them to fn in batches. A job deleted meanwhile is skipped; an
// active one is refused or made pending as the options say.
func readJobs(ctx context.Context, src backend.Backend, o *Options, fn func(jobs []*backend.Job) error) error {
	states := o.States
	if len(states) == 0 {
		states = []backend.State{""}
	}
	for _, st := range states {
		p := backend.ListParams{Queue: o.Queue, State: st, Order: backend.OldestFirst, Limit: o.BatchJobs}
		for {
			var page backend.ListResult
			var jobs []*backend.Job
			var err error
			if wl, ok := src.(backend.WholeLister); ok {
				if page, err = wl.ListWhole(ctx, p); err != nil {
					return fmt.Errorf("list the source's jobs: %w", err)
				}
				jobs = page.Jobs
			} else {
				if page, err = src.List(ctx, p); err != nil {
					return fmt.Errorf("list the source's jobs: %w", err)
				}
				if jobs, err = getAll(ctx, src, page.Jobs, o.Readers); err != nil {
					return err
				}
			}
			out := jobs[:0]
			for _, j := range jobs {
				if j == nil {
					continue
				}
				if j.State == backend.StateActive {
					if o.Active != ActivePending {
						return &ActiveError{Count: 1, ID: j.ID}
					}
					j = AsPending(j, o.Now())
					if j == nil {
						continue
					}
				}
				out = append(out, j)
			}
			if err := fnBatches(out, o, fn); err != nil {
				return err
			}
			if page.NextCursor == "" {
				break
			}
			p.Cursor = page.NextCursor
		}
	}
	return nil
}

// fnBatches hands jobs to fn in batches within the options' bounds.
func fnBatches(jobs []*backend.Job, o *Options, fn func([]*backend.Job) error) error {
	start, size := 0, 0
	for i, j := range jobs {
		n := len(j.Payload) + len(j.Result) + 512
		for _, l := range j.Logs {
			n += len(l.Line) + 40
		}
		if i > start && size+n > o.BatchBytes {
			if err := fn(jobs[start:i]); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += n
	}
	if start < len(jobs) {
		return fn(jobs[start:])
	}
	return nil
}

// getAll reads the listed jobs whole, n at a time; a job deleted meanwhile
// is nil.
func getAll(ctx context.Context, src backend.Backend, listed []*backend.Job, n int) ([]*backend.Job, error) {
	out := make([]*backend.Job, len(listed))
	errs := make([]error, len(listed))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, len(listed)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j, err := src.Get(ctx, backend.GetParams{ID: listed[i].ID})
				if errors.Is(err, backend.ErrNotFound) {
					continue
				}
				out[i], errs[i] = j, err
			}
		}()
	}
	for i := range listed {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("read the source's jobs: %w", err)
	}
	return out, nil
}

// AsPending returns an active job as it moves under ActivePending: pending
// with its attempt kept and its lease ended, as lease recovery leaves a
// job (the lease token stays, as it only grows). A job whose cancel was
// requested ends cancelled (reason "requested") at now instead, and nil
// is returned when its retention would delete it at once.
func AsPending(j *backend.Job, now time.Time) *backend.Job {
	c := j.Clone()
	c.LeaseExpiresAt, c.WorkerID = time.Time{}, ""
	if !c.CancelRequested {
		c.State = backend.StatePending
		return c
	}
	c.State, c.CancelReason, c.FinishedAt = backend.StateCancelled, backend.CancelReasonRequested, now
	at, deleteNow := backend.Expiry(c.Retention, backend.QueueRetention{}, backend.StateCancelled, now, false)
	if deleteNow {
		return nil
	}
	c.ExpiresAt = at
	return c
}
