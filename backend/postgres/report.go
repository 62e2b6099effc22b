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
func (s *store) Report(ctx context.Context, p backend.ReportParams) (backend.BatchResult, error) {
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
	// Items for the same lease are merged (their lines in order, the last
	// progress), so the statement meets each job once.
	type merged struct {
		id       string
		token    int64
		progress pgtype.Text
		lines    []string
	}
	var jobs []*merged
	byLease := map[backend.Lease]*merged{}
	for k, i := range b.pos {
		it := p.Items[i]
		l := backend.Lease{JobID: b.canon[i], Token: b.tokens[k]}
		m := byLease[l]
		if m == nil {
			m = &merged{id: l.JobID, token: l.Token}
			byLease[l] = m
			jobs = append(jobs, m)
		}
		if it.Progress != nil {
			pr := *it.Progress
			pr.At = p.Now.UTC()
			raw, err := json.Marshal(pr)
			if err != nil {
				return backend.BatchResult{}, fmt.Errorf("kyu/postgres: report: encode progress: %w", err)
			}
			m.progress = pgtype.Text{String: string(raw), Valid: true}
		}
		m.lines = append(m.lines, it.Logs...)
	}
	ids, tokens := make([]string, len(jobs)), make([]int64, len(jobs))
	progress, counts := make([]pgtype.Text, len(jobs)), make([]int32, len(jobs))
	var lineJobs, lineText []string
	var lineOrd []int32
	for k, m := range jobs {
		ids[k], tokens[k], progress[k], counts[k] = m.id, m.token, m.progress, int32(len(m.lines))
		for o, l := range m.lines {
			lineJobs = append(lineJobs, m.id)
			lineOrd = append(lineOrd, int32(o))
			lineText = append(lineText, l)
		}
	}
	rows, err := s.pool.Query(ctx, s.sqls.report, p.Now, ids, tokens, progress, counts, int32(p.MaxLines()),
		lineJobs, lineOrd, lineText)
	if err != nil {
		return backend.BatchResult{}, s.wrap("report", err)
	}
	if err := s.settle(ctx, b, rows); err != nil {
		return backend.BatchResult{}, s.wrap("report", err)
	}
	return backend.BatchResult{Errors: b.errs}, nil
}
