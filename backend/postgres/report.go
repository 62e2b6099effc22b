package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kyuhq/kyu/backend"
)

// Report records progress and log lines under the live leases among
// p.Items in one statement: progress replaces the job's, lines go to
// job_logs up to the cap and are counted in logs_dropped past it.
func (s *Store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
	if err := p.Check(); err != nil {
		return backend.BatchResult{}, err
	}
	if err := s.begin(ctx); err != nil {
		return backend.BatchResult{}, err
	}
	defer s.end()
	leases := make([]backend.Lease, len(p.Items))
	for i, it := range p.Items {
		leases[i] = it.Lease
	}
	b := newLeaseBatch(leases)
	if len(b.ids) == 0 {
		return backend.BatchResult{Errors: b.errs}, nil
	}
	n := len(b.ids)
	progress, counts := make([]pgtype.Text, n), make([]int32, n)
	var lineJobs, lineText []string
	var lineOrd []int32
	for k, i := range b.pos {
		it := p.Items[i]
		if it.Progress != nil {
			pr := *it.Progress
			pr.At = p.Now.UTC()
			raw, err := json.Marshal(pr)
			if err != nil {
				return backend.BatchResult{}, fmt.Errorf("kyu/postgres: report: encode progress: %w", err)
			}
			progress[k] = pgtype.Text{String: string(raw), Valid: true}
		}
		counts[k] = int32(len(it.Logs))
		for o, l := range it.Logs {
			lineJobs = append(lineJobs, b.canon[i])
			lineOrd = append(lineOrd, int32(o))
			lineText = append(lineText, l)
		}
	}
	rows, err := s.pool.Query(ctx, s.sqls.report, p.Now, b.ids, b.tokens, progress, counts, int32(p.MaxLines()),
		lineJobs, lineOrd, lineText)
	if err != nil {
		return backend.BatchResult{}, s.wrap("report", err)
	}
	if err := s.settle(ctx, b, rows); err != nil {
		return backend.BatchResult{}, s.wrap("report", err)
	}
	return backend.BatchResult{Errors: b.errs}, nil
}
