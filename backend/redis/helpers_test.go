package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/redis/rueidis"
)

const (
	testURLEnv     = "KYU_TEST_REDIS_URL"
	testDefaultURL = "redis://127.0.0.1:6379/0"
)

// testURL is the shared test server's URL.
func testURL() string { return backendtest.ServiceURL(testURLEnv, testDefaultURL) }

// testPrefix is a key prefix no other test uses.
func testPrefix(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "kyutest-" + hex.EncodeToString(b)
}

// openTest opens a store on the server rawURL names (the shared test
// server when empty) in a fresh prefix, skipping or failing as
// backendtest.Unreachable says when the server cannot be reached. The
// store is closed and every key of its prefix removed at cleanup.
func openTest(t testing.TB, rawURL string) *Store {
	t.Helper()
	if rawURL == "" {
		rawURL = testURL()
	}
	o, err := ParseURL(rawURL)
	if err != nil {
		t.Fatalf("test URL: %v", err)
	}
	o.Prefix = testPrefix(t)
	o.RetryFor = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, o)
	if err != nil {
		backendtest.Unreachable(t, "redis", testURLEnv, rawURL, err)
	}
	t.Cleanup(func() {
		s.Close()
		if err := dropPrefix(o); err != nil {
			t.Errorf("remove the test keys of prefix %s: %v", o.Prefix, err)
		}
	})
	return s
}

// backendtestUnreachable ends a test whose server cannot be had, as
// backendtest.Unreachable says (skip, or fail when redis is required).
func backendtestUnreachable(t testing.TB, server string, err error) {
	t.Helper()
	backendtest.Unreachable(t, "redis", testURLEnv, server, err)
}

// dropPrefix deletes every key of a store's prefix, on every primary.
func dropPrefix(o Options) error {
	co := rueidis.ClientOption{
		InitAddress: o.Addrs, Username: o.Username, Password: o.Password, SelectDB: o.DB, TLSConfig: o.TLS,
		DisableCache: true, ForceSingleClient: !o.Cluster && o.SentinelMaster == "",
		Sentinel: rueidis.SentinelOption{MasterSet: o.SentinelMaster},
	}
	c, err := rueidis.NewClient(co)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pattern := keys{prefix: o.Prefix}.scanPattern()
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			for _, k := range e.Elements {
				if err := c.Do(ctx, c.B().Unlink().Key(k).Build()).Error(); err != nil {
					return err
				}
			}
			if e.Cursor == 0 {
				break
			}
			cursor = e.Cursor
		}
	}
	return nil
}

// completeItems returns a completion of each claimed job, without a
// result.
func completeItems(jobs []*backend.Job) []backend.CompleteItem {
	items := make([]backend.CompleteItem, len(jobs))
	for i, j := range jobs {
		items[i] = backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}
	}
	return items
}

// openPrivate opens a store on the private server ps, retrying calls for
// up to 2 s, and closes it at cleanup.
func openPrivate(t testing.TB, ps *privateServer) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Addrs: []string{ps.addr()}, RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openTwin opens a second store with s's options, as another process
// would, and closes it at cleanup.
func openTwin(t testing.TB, s *Store) *Store {
	t.Helper()
	o, err := Open(context.Background(), s.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// openTestFormat is openTest's store opened again after its marker was
// set to format v, as a store an older kyu made: a store of format 2 is
// written as format 2 (long headers only).
func openTestFormat(t testing.TB, v int) *Store {
	t.Helper()
	s := openTest(t, "")
	if v == formatVersion {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := s.client
	if err := c.Do(ctx, c.B().Hset().Key(s.keys.meta()).FieldValue().FieldValue("kyu", strconv.Itoa(v)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, s.opts)
	if err != nil {
		t.Fatalf("open a store of format %d: %v", v, err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// eachFormat runs test in parallel subtests, one per format this
// package writes (2 and formatVersion), each on a fresh store of it.
func eachFormat(t *testing.T, test func(t *testing.T, s *Store, format int)) {
	t.Helper()
	for _, v := range []int{2, formatVersion} {
		t.Run("format"+strconv.Itoa(v), func(t *testing.T) {
			t.Parallel()
			test(t, openTestFormat(t, v), v)
		})
	}
}

// headerFieldsOf is the header of the record rec, of any form, as the
// fields of its long form, and what follows the header (all of a bare
// record).
func headerFieldsOf(t testing.TB, rec string) (fields []string, tail string) {
	t.Helper()
	var h [headerFields]string
	tail, ok := splitRecord(rec, &h)
	if !ok {
		t.Fatalf("record %q has no header", rec)
	}
	return h[:], tail
}

// recordHead is the header of the record rec, without its newline ("" for
// a bare record), and what follows it (all of a bare record).
func recordHead(rec string) (head, tail string) {
	if isBare(rec) {
		return "", rec
	}
	head, tail, _ = strings.Cut(rec, "\n")
	return head, tail
}

// enqueueIDs enqueues jobs at now in one call and returns their ids, in
// order.
func enqueueIDs(t testing.TB, s *Store, now time.Time, jobs ...backend.NewJob) []string {
	t.Helper()
	res, err := s.Enqueue(t.Context(), backend.EnqueueParams{Now: now, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Jobs))
	for k, j := range res.Jobs {
		ids[k] = j.ID
	}
	return ids
}

// runLean runs the lean enqueue script of group g (built by buildEnqueue)
// in queue num: the outcome of each job, or nil when the script asks for
// the full one.
func runLean(t testing.TB, s *Store, g *enqueueGroup, num uint32) []int64 {
	t.Helper()
	reply := s.eval(t.Context(), s.scripts.enqueueLean, s.keysOf(s.scripts.enqueueLean, num), g.leanArgs())
	items, asked, err := g.replyItems(reply)
	if err != nil {
		t.Fatalf("lean enqueue script: %v", err)
	}
	if asked {
		return nil
	}
	out := make([]int64, len(items))
	for i, it := range items {
		if out[i], err = it.AsInt64(); err != nil {
			t.Fatalf("lean enqueue script: outcome %s, want a number", it.String())
		}
	}
	return out
}
