package pebble

import (
	"context"
	"fmt"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/kyuhq/kyu/backend"
)

// Log lines live under their own keys, logKey(id, n) for n from 0, so that
// a job's record (rewritten at every claim, heartbeat and outcome) stays
// small however much its handler logs; the record counts the lines held
// (side.logs) and LogsDropped. Get reads them back; List leaves them out.

// Report records progress and log lines of active jobs under their live
// leases. Progress replaces the previous one with At = Now; lines are
// appended with At = Now until the job holds p.MaxLines(), then counted in
// LogsDropped.
func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	max := p.MaxLines()
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	errs, err := s.leaseOp(ctx, leases, p.Now, func(i int, id jobID, j *backend.Job, sd side) {
		it := &p.Items[i]
		if it.Progress != nil {
			j.Progress = &backend.Progress{Percent: it.Progress.Percent, Message: it.Progress.Message, At: p.Now}
		}
		g := s.group()
		for _, line := range it.Logs {
			if sd.logs >= max {
				j.LogsDropped++
				continue
			}
			_ = g.batch.Set(logKey(id, sd.logs), encodeLogLine(p.Now, line), nil)
			sd.logs++
		}
		s.put(id, j, sd)
		le := s.idx.leases[id]
		le.job, le.sd = j, sd
		s.idx.leases[id] = le
	})
	return backend.BatchResult{Errors: errs}, err
}

// encodeLogLine is a log line's value: its time (appendTime), then the
// line's bytes.
func encodeLogLine(at time.Time, line string) []byte {
	b := make([]byte, 0, 10+len(line))
	b = appendTime(b, at)
	return append(b, line...)
}

// iterSource is a Pebble DB or snapshot.
type iterSource interface {
	reader
	NewIter(o *cpebble.IterOptions) (*cpebble.Iterator, error)
}

// readSide reads a job's payload and log lines from r.
func (s *store) readSide(r iterSource, id jobID, sd side) (payload []byte, logs []backend.LogLine, err error) {
	if sd.payload {
		if payload, err = s.readPayload(r, id); err != nil {
			return nil, nil, err
		}
		if payload == nil {
			payload = []byte{}
		}
	}
	if sd.logs > 0 {
		if logs, err = readLogs(r, id, sd.logs); err != nil {
			return nil, nil, err
		}
	}
	return payload, logs, nil
}

// readLogs reads the n log lines of a job.
func readLogs(r iterSource, id jobID, n int) ([]backend.LogLine, error) {
	lo := logPrefix(id)
	hi := logKey(id, n)
	it, err := r.NewIter(&cpebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("kyu/pebble: read logs of %s: %w", id, err)
	}
	logs := make([]backend.LogLine, 0, n)
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("kyu/pebble: read logs of %s: %w", id, err)
		}
		d := decoder{b: v}
		at := d.time()
		if d.err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("%w: job %s: log line: %w", ErrCorrupt, id, d.err)
		}
		logs = append(logs, backend.LogLine{At: at, Line: string(d.b)})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("kyu/pebble: read logs of %s: %w", id, err)
	}
	if len(logs) != n {
		return nil, fmt.Errorf("%w: job %s: %d log lines of %d found", ErrCorrupt, id, len(logs), n)
	}
	return logs, nil
}
