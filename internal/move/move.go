package move

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// Conflict is a job the target refused: a different job has its id, or
// its unique key is held there. Line is its line in the input (0 for a
// copy).
type Conflict struct {
	Line   int64
	ID     string
	Reason string
}

// maxConflicts is how many conflicts a Summary lists (all are counted).
const maxConflicts = 100

// Summary says what a move did.
type Summary struct {
	// Jobs counts the jobs read; Queues the queue settings moved.
	Jobs   int64
	Queues int64
	// Created, Same and Conflicted count the outcomes in the target.
	Created, Same, Conflicted int64
	// Conflicts lists the first conflicts.
	Conflicts []Conflict
	Elapsed   time.Duration
}

// ConflictError says that some jobs were refused by the target (every
// other job was written).
type ConflictError struct {
	Count int64
	First []Conflict
}

func (e *ConflictError) Error() string {
	c := e.First[0]
	where := "job " + c.ID
	if c.Line > 0 {
		where = fmt.Sprintf("line %d (job %s)", c.Line, c.ID)
	}
	return fmt.Sprintf("%d jobs were not written, the target holds something else: first, %s: %s", e.Count, where, c.Reason)
}

// err returns a *ConflictError when a job was refused.
func (s *Summary) err() error {
	if s.Conflicted == 0 {
		return nil
	}
	return &ConflictError{Count: s.Conflicted, First: s.Conflicts}
}

// target writes batches into a store and tallies their outcomes.
type target struct {
	dst backend.Backend
	o   *Options
	// mu guards sum: Copy's writers share it.
	mu  sync.Mutex
	sum *Summary
}

// done is how many jobs were written so far.
func (t *target) done() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum.Jobs
}

// queue writes one queue's settings.
func (t *target) queue(ctx context.Context, q QueueLine) error {
	paused, ret := q.Paused, q.Retention
	_, err := t.dst.UpdateQueue(ctx, backend.UpdateQueueParams{Queue: q.Name, Paused: &paused, Retention: &ret, Now: t.o.Now()})
	if err != nil {
		return fmt.Errorf("queue %s: %w", q.Name, err)
	}
	t.sum.Queues++
	return nil
}

// jobs imports one batch; lines, when not nil, are the jobs' input lines.
func (t *target) jobs(ctx context.Context, jobs []*backend.Job, lines []int64) error {
	if len(jobs) == 0 {
		return nil
	}
	res, err := t.dst.Import(ctx, backend.ImportParams{Jobs: jobs, Now: t.o.Now()})
	if err != nil {
		var ve *backend.ValidationError
		if errors.As(err, &ve) && ve.Index >= 0 && ve.Index < len(jobs) {
			return fmt.Errorf("%s: %w", where(jobs[ve.Index].ID, lines, ve.Index), err)
		}
		return fmt.Errorf("import into the target: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, it := range res.Items {
		switch it.Outcome {
		case backend.ImportCreated:
			t.sum.Created++
		case backend.ImportSame:
			t.sum.Same++
		default:
			t.sum.Conflicted++
			if len(t.sum.Conflicts) < maxConflicts {
				c := Conflict{ID: jobs[i].ID, Reason: it.Reason}
				if lines != nil {
					c.Line = lines[i]
				}
				t.sum.Conflicts = append(t.sum.Conflicts, c)
			}
		}
	}
	t.sum.Jobs += int64(len(jobs))
	return nil
}

// where names a job of a batch: its line when known, and its id.
func where(id string, lines []int64, i int) string {
	if lines != nil {
		return fmt.Sprintf("line %d (job %s)", lines[i], id)
	}
	return "job " + id
}

// Export writes the jobs the options choose, and their queues' settings,
// to w as JSON lines (see the package doc), a batch at a time.
func Export(ctx context.Context, src backend.Backend, w io.Writer, o Options) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	began := time.Now()
	var sum Summary
	queues, total, active, err := census(ctx, src, o.Filter, o.Now())
	if err != nil {
		return sum, err
	}
	if active > 0 && o.Active == ActiveRefuse {
		return sum, &ActiveError{Count: active}
	}
	var buf bytes.Buffer
	flush := func() error {
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		return err
	}
	if err := appendJSONLine(&buf, Header{Kind: KindHeader, Version: FormatVersion, CreatedAt: o.Now().UTC(), Queue: o.Queue, States: o.States}); err != nil {
		return sum, err
	}
	for _, q := range queues {
		if err := appendJSONLine(&buf, q); err != nil {
			return sum, err
		}
		sum.Queues++
	}
	err = readJobs(ctx, src, &o, func(jobs []*backend.Job) error {
		for _, j := range jobs {
			if err := appendJSONLine(&buf, api.FromJob(j)); err != nil {
				return fmt.Errorf("job %s: %w", j.ID, err)
			}
		}
		sum.Jobs += int64(len(jobs))
		if o.Progress != nil {
			o.Progress(sum.Jobs, total)
		}
		return flush()
	})
	if err != nil {
		return sum, err
	}
	if err := appendJSONLine(&buf, EndLine{Kind: KindEnd, Jobs: sum.Jobs, Queues: sum.Queues}); err != nil {
		return sum, err
	}
	sum.Elapsed = time.Since(began)
	return sum, flush()
}

// Copy streams the jobs the options choose, and their queues' settings,
// from src into dst. It is idempotent: a second copy reports every job
// Same. A job dst refuses is listed in the Summary and the error is a
// *ConflictError; everything else is written.
func Copy(ctx context.Context, src, dst backend.Backend, o Options) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	began := time.Now()
	var sum Summary
	queues, total, active, err := census(ctx, src, o.Filter, o.Now())
	if err != nil {
		return sum, err
	}
	if active > 0 && o.Active == ActiveRefuse {
		return sum, &ActiveError{Count: active}
	}
	t := &target{dst: dst, o: &o, sum: &sum}
	for _, q := range queues {
		if err := t.queue(ctx, q); err != nil {
			return sum, err
		}
	}
	// The source is read while the target writes the batches before,
	// o.Writers at once: at most o.Writers+1 batches are held.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*backend.Job)
	written := make(chan error, o.Writers)
	var mu sync.Mutex // o.Progress is called by one writer at a time
	for range o.Writers {
		go func() {
			var werr error
			for jobs := range batches {
				if werr != nil {
					continue
				}
				if werr = t.jobs(ctx, jobs, nil); werr != nil {
					cancel()
					continue
				}
				if o.Progress != nil {
					mu.Lock()
					o.Progress(t.done(), total)
					mu.Unlock()
				}
			}
			written <- werr
		}()
	}
	err = readJobs(ctx, src, &o, func(jobs []*backend.Job) error {
		select {
		case batches <- slices.Clone(jobs):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(batches)
	for range o.Writers {
		if werr := <-written; werr != nil && (err == nil || errors.Is(err, context.Canceled)) {
			err = werr
		}
	}
	sum.Elapsed = time.Since(began)
	if err != nil {
		return sum, err
	}
	return sum, sum.err()
}

// maxLine bounds one line of input: a job of the largest payload and
// result, base64-encoded, with its log.
const maxLine = 64 << 20

// scan reads an export from r, checking every line, and calls the
// callbacks in order (any may be nil); jobs come in batches, with their
// line numbers. It fails, naming the line, at the first line that is not
// part of an export, and with ErrTruncated when the end line is missing or
// its counts disagree with what came before.
func scan(r io.Reader, o *Options, onQueue func(QueueLine) error, onJobs func([]*backend.Job, []int64) error) (jobsSeen int64, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		n        int64
		jobLines int64
		header   bool
		end      *EndLine
		queues   int64
		batch    []*backend.Job
		lines    []int64
		size     int
		flushed  = func() error {
			if len(batch) == 0 || onJobs == nil {
				batch, lines, size = batch[:0], lines[:0], 0
				return nil
			}
			err := onJobs(batch, lines)
			batch, lines, size = nil, nil, 0
			return err
		}
	)
	for {
		b, rerr := br.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) {
			var long []byte
			long = append(long, b...)
			for errors.Is(rerr, bufio.ErrBufferFull) && len(long) <= maxLine {
				b, rerr = br.ReadSlice('\n')
				long = append(long, b...)
			}
			if len(long) > maxLine {
				return jobsSeen, &LineError{Line: n + 1, Err: fmt.Errorf("longer than %d bytes", maxLine)}
			}
			b = long
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return jobsSeen, fmt.Errorf("read: %w", rerr)
		}
		if len(b) == 0 && errors.Is(rerr, io.EOF) {
			break
		}
		n++
		if errors.Is(rerr, io.EOF) && !bytes.HasSuffix(b, []byte("\n")) {
			return jobsSeen, &LineError{Line: n, Err: fmt.Errorf("%w (the last line has no newline)", ErrTruncated)}
		}
		if end != nil {
			return jobsSeen, &LineError{Line: n, Err: errors.New("a line after the end line")}
		}
		pl, err := parseLine(b)
		if err != nil {
			return jobsSeen, &LineError{Line: n, Err: err}
		}
		switch {
		case pl.header != nil:
			if header {
				return jobsSeen, &LineError{Line: n, Err: errors.New("a second header")}
			}
			header = true
		case !header:
			return jobsSeen, &LineError{Line: n, Err: errors.New("no header: this is not a kyu export (it must begin with a kyu-export line)")}
		case pl.queue != nil:
			if jobsSeen > 0 {
				return jobsSeen, &LineError{Line: n, Err: errors.New("a queue line after the jobs")}
			}
			queues++
			if onQueue != nil {
				if err := onQueue(*pl.queue); err != nil {
					return jobsSeen, &LineError{Line: n, Err: err}
				}
			}
		case pl.end != nil:
			end = pl.end
		case pl.job != nil:
			jobLines++
			j := pl.job
			if j.State == backend.StateActive {
				if o.Active != ActivePending {
					return jobsSeen, &LineError{Line: n, Err: &ActiveError{Count: 1, ID: j.ID}}
				}
				if j = AsPending(j, o.Now()); j == nil {
					continue
				}
			}
			if err := (&backend.ImportParams{Jobs: []*backend.Job{j}, Now: o.Now()}).Check(); err != nil {
				return jobsSeen, &LineError{Line: n, Err: fmt.Errorf("job %s: %w", j.ID, err)}
			}
			jobsSeen++
			batch, lines = append(batch, j), append(lines, n)
			size += len(b)
			if len(batch) >= o.BatchJobs || size >= o.BatchBytes {
				if err := flushed(); err != nil {
					return jobsSeen, err
				}
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
	}
	if !header {
		return jobsSeen, &LineError{Line: n + 1, Err: errors.New("empty input: no kyu-export header")}
	}
	if end == nil {
		return jobsSeen, &LineError{Line: n + 1, Err: ErrTruncated}
	}
	if end.Jobs != jobLines || end.Queues != queues {
		return jobsSeen, &LineError{Line: n, Err: fmt.Errorf("%w: the end line counts %d jobs and %d queues, the file holds %d and %d", ErrTruncated, end.Jobs, end.Queues, jobLines, queues)}
	}
	return jobsSeen, flushed()
}

// Check reads a whole export and checks every line without writing
// anything; it returns how many jobs the export holds.
func Check(r io.Reader, o Options) (int64, error) {
	if err := o.defaults(); err != nil {
		return 0, err
	}
	return scan(r, &o, nil, nil)
}

// Import writes an export into dst. The input is read twice: a first
// pass checks every line (so a bad line, a truncated file or a version
// from the future changes nothing), the second writes, a batch at a time.
// It is idempotent and resumable: after a crash, rerun it. A job dst
// refuses is listed in the Summary and the error is a *ConflictError;
// every other job is written.
func Import(ctx context.Context, dst backend.Backend, r io.ReadSeeker, o Options) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	began := time.Now()
	total, err := scan(r, &o, nil, nil)
	if err != nil {
		return Summary{}, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return Summary{}, fmt.Errorf("read the input again: %w", err)
	}
	var sum Summary
	t := &target{dst: dst, o: &o, sum: &sum}
	_, err = scan(r,
		&o,
		func(q QueueLine) error { return t.queue(ctx, q) },
		func(jobs []*backend.Job, lines []int64) error {
			if err := t.jobs(ctx, jobs, lines); err != nil {
				return err
			}
			if o.Progress != nil {
				o.Progress(sum.Jobs, total)
			}
			return nil
		})
	sum.Elapsed = time.Since(began)
	if err != nil {
		return sum, err
	}
	return sum, sum.err()
}
