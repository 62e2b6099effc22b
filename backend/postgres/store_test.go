package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend"
)

func TestOpenRefusesUnmigratedSchema(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := testSchemaName(t)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	_, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 2})
	if !errors.Is(err, ErrNotMigrated) {
		t.Fatalf("Open of an empty schema without AutoMigrate = %v; want ErrNotMigrated", err)
	}
	// With the URL's automigrate parameter it opens, and then opens without.
	s, err := Open(t.Context(), url+"&automigrate=true&schema="+schema, Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open with automigrate=true: %v", err)
	}
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q; want %q from the URL", s.Schema(), schema)
	}
	s.Close()
	s, err = Open(t.Context(), url, Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("Open of a migrated schema: %v", err)
	}
	// Migrate again is a no-op.
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	s.Close()
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	_, err := s.Pool().Exec(t.Context(), `INSERT INTO `+s.schema+`.schema_versions (version, name, applied_at) VALUES ($1, 'from the future', now())`, SchemaVersion()+1)
	if err != nil {
		t.Fatal(err)
	}
	url := testURL(t)
	for _, auto := range []bool{false, true} {
		_, err = Open(t.Context(), url, Options{Schema: s.Schema(), AutoMigrate: auto, MaxConns: 2})
		if !errors.Is(err, ErrSchemaNewer) {
			t.Fatalf("Open (AutoMigrate %v) of a schema at version %d = %v; want ErrSchemaNewer", auto, SchemaVersion()+1, err)
		}
	}
}

func TestOpenBadInput(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	cases := []struct {
		url  string
		opts Options
		want error
	}{
		{"postgres://u:hunter2@[::1", Options{}, ErrBadURL},
		{url + "&automigrate=maybe", Options{}, ErrBadURL},
		{url, Options{Schema: "no-dashes"}, ErrBadURL},
		{url, Options{Schema: strings.Repeat("s", 64)}, ErrBadURL},
	}
	for _, c := range cases {
		_, err := Open(t.Context(), c.url, c.opts)
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%q, schema %q) = %v; want %v", c.url, c.opts.Schema, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error repeats the password: %v", err)
		}
	}
}

// TestCorruptRow: a row edited into values kyu never writes gives an error
// wrapping ErrCorrupt that names the job, on Get and on Claim.
func TestCorruptRow(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	edits := map[string]string{
		"errors":    `errors = '{"not": "a list"}'`,
		"retention": `retention_ns = -7`,
		"attempt":   `max_attempts = 0`,
		"tags":      `tags = '"a string"'`,
		"priority":  `priority = 1000`,
	}
	for field, edit := range edits {
		res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "corrupt-" + field}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Jobs[0].ID
		if _, err := s.Pool().Exec(t.Context(), `UPDATE `+s.schema+`.jobs SET `+edit+` WHERE id = $1`, id); err != nil {
			t.Fatalf("edit %s: %v", field, err)
		}
		_, err = s.Get(t.Context(), backend.GetParams{ID: id})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), field) {
			t.Errorf("Get of a job with a corrupt %s = %v; want ErrCorrupt naming the job and the field", field, err)
		}
		_, err = s.Claim(t.Context(), backend.ClaimParams{Queues: []string{"corrupt-" + field}, Max: 1, Lease: time.Minute, Now: now})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("Claim of a job with a corrupt %s = %v; want ErrCorrupt", field, err)
		}
	}
}

// TestCorruptState checks the decoding of a state kyu does not know; the
// table's CHECK constraint keeps such a row from being written at all.
func TestCorruptState(t *testing.T) {
	t.Parallel()
	r := rawJob{id: "x", state: "exploded", maxAttempts: 1}
	if _, err := r.job(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exploded") {
		t.Fatalf("decoding state %q = %v; want ErrCorrupt naming it", r.state, err)
	}
	s := openTestStore(t, Options{MaxConns: 2})
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pool().Exec(t.Context(), `UPDATE `+s.schema+`.jobs SET state = 'exploded' WHERE id = $1`, res.Jobs[0].ID)
	if err == nil {
		t.Fatal("the jobs table accepted an unknown state")
	}
}

// TestSchemasApart: two stores in two schemas of one database share
// nothing, not even wake-ups.
func TestSchemasApart(t *testing.T) {
	t.Parallel()
	a := openTestStore(t, Options{MaxConns: 2})
	b := openTestStore(t, Options{MaxConns: 2})
	now := time.Now()
	subB, err := b.Subscribe(t.Context(), backend.SubscribeParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	subA, err := a.Subscribe(t.Context(), backend.SubscribeParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	// Through a transaction, so the only wake-up is the NOTIFY.
	tx, err := a.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnqueueTx(t.Context(), tx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t"}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-subA.C:
	case <-time.After(waitBound):
		t.Fatal("no wake-up in the schema that got the job")
	}
	got, err := b.Claim(t.Context(), backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 5, Lease: time.Minute, Now: now})
	if err != nil || len(got.Jobs) != 0 {
		t.Fatalf("Claim in the other schema = %d jobs, %v; want none", len(got.Jobs), err)
	}
	// b's listener holds its own connection; a NOTIFY on b's channel after
	// a's proves a's reached b by then if it ever would.
	if _, err := b.Pool().Exec(t.Context(), `SELECT pg_notify($1, 'marker')`, b.channel); err != nil {
		t.Fatal(err)
	}
	select {
	case <-subB.C:
	case <-time.After(waitBound):
		t.Fatal("no marker wake-up")
	}
	if signalled(subB) {
		t.Fatal("the other schema's store was woken twice")
	}
}

// TestMigrateConcurrently: stores opening one fresh schema at once with
// AutoMigrate all succeed, and the migration is applied once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	schema := testSchemaName(t)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := Open(context.Background(), url, Options{Schema: schema, AutoMigrate: true, MaxConns: 1})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open with AutoMigrate: %v", err)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_versions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != SchemaVersion() {
		t.Fatalf("%d versions recorded; want %d", n, SchemaVersion())
	}
}

// TestOpenRefusesHalfSchema: a schema whose version is recorded but which
// lost a table is refused with an error naming what is missing.
func TestOpenRefusesHalfSchema(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	if _, err := s.Pool().Exec(t.Context(), `DROP TABLE `+s.schema+`.unique_keys CASCADE`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), testURL(t), Options{Schema: s.Schema(), MaxConns: 2})
	if !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "unique_keys") {
		t.Fatalf("Open of a schema without its unique_keys table = %v; want ErrNotMigrated naming the table", err)
	}
}

// TestCorruptRowInClaim: a claim that meets a corrupt row fails, and hands
// the good jobs it took back at once.
func TestCorruptRowInClaim(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, Options{MaxConns: 2})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{{Type: "t", Queue: "mixed"}, {Type: "t", Queue: "mixed"}}})
	if err != nil {
		t.Fatal(err)
	}
	bad, good := res.Jobs[0].ID, res.Jobs[1].ID
	if _, err := s.Pool().Exec(t.Context(), `UPDATE `+s.schema+`.jobs SET tags = '7' WHERE id = $1`, bad); err != nil {
		t.Fatal(err)
	}
	_, err = s.Claim(t.Context(), backend.ClaimParams{Queues: []string{"mixed"}, Max: 2, Lease: time.Minute, Now: now})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Claim over a corrupt row = %v; want ErrCorrupt", err)
	}
	j, err := s.Get(t.Context(), backend.GetParams{ID: good})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != backend.StatePending || j.Attempt != 0 {
		t.Fatalf("the good job is %s at attempt %d after the failed claim; want pending at attempt 0 (handed back)", j.State, j.Attempt)
	}
}
