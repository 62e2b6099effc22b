package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// stepPlan returns the generic plan (as the store's connections run it:
// force_generic_plan, bitmap scans off) of the promotion/deadline step
// with queues as $2 (nil for every queue), as EXPLAIN's JSON.
func stepPlan(ctx context.Context, s *Store, queues []string, analyze bool) (string, error) {
	q := "NULL::text[]"
	if queues != nil {
		lits := make([]string, len(queues))
		for i, n := range queues {
			lits[i] = quoteLiteral(n)
		}
		q = "ARRAY[" + strings.Join(lits, ", ") + "]::text[]"
	}
	// EXPLAIN ANALYZE runs the step; genericPlan rolls it back.
	return genericPlan(ctx, s, s.sqls.step, "timestamptz, text[], int, text",
		"'2026-01-01T00:00:00Z', "+q+", 1000, 'kyu_plan_test'", analyze)
}

// planScans returns the relations a JSON plan reads with a sequential
// scan, and the indexes it scans.
func planScans(plan string) (seq, indexes []string, err error) {
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil {
		return nil, nil, fmt.Errorf("decode plan: %w", err)
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Node Type"] == "Seq Scan" {
			rel, _ := n["Relation Name"].(string)
			seq = append(seq, rel)
		}
		if idx, ok := n["Index Name"].(string); ok {
			indexes = append(indexes, idx)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	for _, d := range doc {
		walk(d.Plan)
	}
	return seq, indexes, nil
}

// TestStepPlanUsesIndexes checks that, once the jobs table has statistics
// (autovacuum analyses it often), the generic plan of the step every Claim
// runs reads jobs through its indexes and never scans the table.
func TestStepPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("KYU_TEST_PLAN_ROWS")); err == nil && v > 0 {
		n = v
	}
	s := openTestStore(t, Options{MaxConns: 2})
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Mostly pending jobs in a few queues; one in 20 scheduled (half due),
	// one in 2000 with a deadline (half passed), a few retrying.
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (id, queue, type, payload, priority, state, max_attempts, run_at,
		timeout_ns, deadline, created_at)
	SELECT gen_random_uuid(), 'q' || (i % 4), 't', '\x00', 0,
		CASE WHEN i % 20 = 0 THEN 'scheduled' WHEN i % 97 = 0 THEN 'retry' ELSE 'pending' END, 3,
		CASE WHEN i % 20 = 0 AND i % 40 <> 0 THEN $1::timestamptz + interval '1 hour' ELSE $1::timestamptz - interval '1 hour' END,
		0,
		CASE WHEN i % 2000 = 1 THEN $1::timestamptz + (CASE WHEN i % 4000 = 1 THEN -1 ELSE 1 END) * interval '1 minute' END,
		$1::timestamptz - interval '2 hours'
	FROM generate_series(1, $2::int) i`, now, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE `+s.schema+`.jobs`); err != nil {
		t.Fatal(err)
	}
	for _, queues := range [][]string{{"q1"}, {"q0", "q2"}, nil} {
		plan, err := stepPlan(ctx, s, queues, false)
		if err != nil {
			t.Fatal(err)
		}
		seq, indexes, err := planScans(plan)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(seq, "jobs") || !slices.Contains(indexes, "jobs_due") || !slices.Contains(indexes, "jobs_deadline") {
			text, _ := stepPlan(ctx, s, queues, true)
			t.Errorf("step with queues %q: sequential scans %v, index scans %v; want no sequential scan of jobs, and jobs_due and jobs_deadline used:\n%s",
				queues, seq, indexes, text)
		}
		if testing.Verbose() && os.Getenv("KYU_TEST_PLAN_ROWS") != "" {
			text, err := stepPlan(ctx, s, queues, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("queues %q:\n%s", queues, text)
		}
	}
}

// genericPlan returns the generic plan of query, prepared with the
// parameter types types and run with the literal arguments args, as
// EXPLAIN's JSON (FORMAT TEXT with analyze), in a transaction rolled back.
func genericPlan(ctx context.Context, s *Store, query, types, args string, analyze bool) (string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("acquire: %w", err)
	}
	defer conn.Release()
	name := "kyu_plan_test_generic"
	if _, err := conn.Exec(ctx, `PREPARE `+name+`(`+types+`) AS `+query); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE `+name) }()
	opts := "FORMAT JSON"
	if analyze {
		opts = "ANALYZE, BUFFERS, FORMAT TEXT"
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, `EXPLAIN (`+opts+`) EXECUTE `+name+`(`+args+`)`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// updateJoin returns the node types of the join under the first UPDATE
// of a JSON plan and of the join's two inputs, and the index the inner
// input scans.
func updateJoin(plan string) (join, outer, inner, index string, err error) {
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil {
		return "", "", "", "", fmt.Errorf("decode plan: %w", err)
	}
	kids := func(n map[string]any) []map[string]any {
		var out []map[string]any
		ks, _ := n["Plans"].([]any)
		for _, k := range ks {
			if m, ok := k.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	var find func(n map[string]any) map[string]any
	find = func(n map[string]any) map[string]any {
		if n["Node Type"] == "ModifyTable" && n["Operation"] == "Update" {
			return n
		}
		for _, k := range kids(n) {
			if f := find(k); f != nil {
				return f
			}
		}
		return nil
	}
	for _, d := range doc {
		up := find(d.Plan)
		if up == nil {
			continue
		}
		for _, j := range kids(up) {
			if j["Parent Relationship"] != "Outer" {
				continue
			}
			join, _ = j["Node Type"].(string)
			ins := kids(j)
			var in []map[string]any
			for _, k := range ins {
				if r := k["Parent Relationship"]; r == "Outer" || r == "Inner" {
					in = append(in, k)
				}
			}
			if len(in) == 2 {
				outer, _ = in[0]["Node Type"].(string)
				inner, _ = in[1]["Node Type"].(string)
				index, _ = in[1]["Index Name"].(string)
			}
			return join, outer, inner, index, nil
		}
	}
	return "", "", "", "", fmt.Errorf("no UPDATE in the plan")
}

// TestCompleteLeanPlan checks that the generic plan of the lean
// completion updates the rows in the order of its ids (a nested loop over
// the ids with a lookup by primary key), the order in which the other
// batch statements lock rows, however many jobs the table holds.
func TestCompleteLeanPlan(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(n int) {
		t.Helper()
		_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (id, queue, type, payload, priority, state, max_attempts, run_at,
			timeout_ns, created_at, lease_expires_at, lease_token)
		SELECT gen_random_uuid(), 'q', 't', '\x00', 0, 'active', 3, $1::timestamptz, 0, $1::timestamptz,
			$1::timestamptz + interval '1 hour', 1
		FROM generate_series(1, $2::int) i`, now, n)
		if err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	check := func(what string) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, `SELECT array_agg(id::text) FROM (SELECT id FROM `+s.schema+`.jobs ORDER BY id LIMIT 50) x`).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		tokens := strings.TrimSuffix(strings.Repeat("1,", len(ids)), ",")
		args := fmt.Sprintf(`'2026-01-01T00:00:00Z', '{%s}', '{%s}', '{}', '2026-01-01T00:00:00Z'`, strings.Join(ids, ","), tokens)
		const types = "timestamptz, uuid[], bigint[], bytea[], timestamptz"
		plan, err := genericPlan(ctx, s, s.sqls.completeLean, types, args, false)
		if err != nil {
			t.Fatal(err)
		}
		join, outer, inner, index, err := updateJoin(plan)
		if err != nil {
			t.Fatal(err)
		}
		// The join hands the rows to the update in the order of its outer
		// input: that must be the ids (or both sorted, by a merge join).
		if join != "Merge Join" && outer != "Function Scan" {
			text, _ := genericPlan(ctx, s, s.sqls.completeLean, types, args, true)
			t.Errorf("%s: the update joins with a %s over %s and %s; want the ids (the Function Scan) as the outer input:\n%s",
				what, join, outer, inner, text)
		} else if testing.Verbose() {
			t.Logf("%s: %s over %s and %s %s", what, join, outer, inner, index)
		}
	}
	total := 0
	for _, n := range []int{3, 30, 300, 3000, 20000} {
		add(n - total)
		total = n
		check(fmt.Sprintf("%d jobs, no statistics", n))
		if _, err := s.pool.Exec(ctx, `ANALYZE `+s.schema+`.jobs`); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("%d jobs, analysed", n))
	}
}

// TestClaimPlan checks that the generic plan of a claim reads the pending
// jobs through jobs_claim and updates them through their tuple ids (a TID
// scan), never scanning the table, with and without statistics.
func TestClaimPlan(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (id, queue, type, payload, priority, state, max_attempts, run_at,
		timeout_ns, created_at)
	SELECT gen_random_uuid(), 'q' || (i % 4), 't', '\x00', 0, CASE WHEN i % 3 = 0 THEN 'completed' ELSE 'pending' END, 3,
		$1::timestamptz, 0, $1::timestamptz
	FROM generate_series(1, 20000) i`, now)
	if err != nil {
		t.Fatal(err)
	}
	const types = "timestamptz, text, int, text, timestamptz"
	const args = `'2026-01-01T00:00:00Z', 'q1', 50, 'w', '2026-01-01T01:00:00Z'`
	statements := []struct{ name, sql, types, args string }{
		{"claim", s.sqls.claim, types, args},
		{"claim within a budget", s.sqls.claimBounded, types + ", bigint, boolean", args + ", 16777216, false"},
		{"claim by type", s.sqls.claimTyped, types + ", bigint, boolean, text[]", args + ", 9223372036854775807, false, '{t}'"},
	}
	for _, what := range []string{"no statistics", "analysed"} {
		if what == "analysed" {
			if _, err := s.pool.Exec(ctx, `ANALYZE `+s.schema+`.jobs`); err != nil {
				t.Fatal(err)
			}
		}
		for _, st := range statements {
			plan, err := genericPlan(ctx, s, st.sql, st.types, st.args, false)
			if err != nil {
				t.Fatal(err)
			}
			seq, indexes, err := planScans(plan)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(seq, "jobs") || !slices.Contains(indexes, "jobs_claim") || !strings.Contains(plan, `"Tid Scan"`) {
				text, _ := genericPlan(ctx, s, st.sql, st.types, st.args, true)
				t.Errorf("%s, %s: sequential scans %v, index scans %v; want jobs_claim and a TID scan, no sequential scan of jobs:\n%s",
					st.name, what, seq, indexes, text)
			}
		}
	}
}

// TestInsertClaimedPlan checks that the generic plan of the insert that
// fills a waiting claim looks for other jobs to claim through jobs_claim,
// never scanning the table, with and without statistics.
func TestInsertClaimedPlan(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (id, queue, type, payload, priority, state, max_attempts, run_at,
		timeout_ns, created_at)
	SELECT gen_random_uuid(), 'q' || (i % 4), 't', '\x00', 0, CASE WHEN i % 3 = 0 THEN 'completed' ELSE 'pending' END, 3,
		$1::timestamptz, 0, $1::timestamptz
	FROM generate_series(1, 20000) i`, now)
	if err != nil {
		t.Fatal(err)
	}
	const types = `uuid, text, text, bytea, text, smallint, text, int, timestamptz, bigint, timestamptz, text, bigint,
		jsonb, jsonb, bigint, text, timestamptz, timestamptz, text, timestamptz, `
	const args = `'0190a5c0-0000-7000-8000-000000000001', 'q1', 't', '\x00', '', 0, 'pending', 3, '2026-01-01T00:00:00Z', 0,
		NULL, NULL, 0, NULL, NULL, 0, NULL, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'w', '2026-01-01T01:00:00Z', `
	forms := []struct{ name, query, queues, typ string }{
		{"queues", s.sqls.insertClaimed, `'{q0,q1}'`, "text[]"},
		{"one queue", s.sqls.insertClaimedOne, `'q1'`, "text"},
	}
	for _, what := range []string{"no statistics", "analysed"} {
		if what == "analysed" {
			if _, err := s.pool.Exec(ctx, `ANALYZE `+s.schema+`.jobs`); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range forms {
			plan, err := genericPlan(ctx, s, f.query, types+f.typ, args+f.queues, false)
			if err != nil {
				t.Fatal(err)
			}
			seq, indexes, err := planScans(plan)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(seq, "jobs") || !slices.Contains(indexes, "jobs_claim") {
				text, _ := genericPlan(ctx, s, f.query, types+f.typ, args+f.queues, true)
				t.Errorf("%s, %s: sequential scans %v, index scans %v; want jobs_claim, no sequential scan of jobs:\n%s",
					what, f.name, seq, indexes, text)
			}
		}
	}
}
