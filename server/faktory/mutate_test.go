package faktory_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/faktory"
)

// fillSet puts three jobs into the Faktory set target: a (type A, args
// ["x"]), b (type B, ["uid:1"]) and c (type A, ["uid:2"]).
func fillSet(t *testing.T, c *fwp, target, prefix string) {
	t.Helper()
	jobs := []map[string]any{
		jobJSON(prefix+"a", "A", map[string]any{"args": []any{"x"}}),
		jobJSON(prefix+"b", "B", map[string]any{"args": []any{"uid:1"}}),
		jobJSON(prefix+"c", "A", map[string]any{"args": []any{"uid:2"}}),
	}
	for _, j := range jobs {
		switch target {
		case "scheduled":
			j["at"] = "2099-01-01T00:00:00Z"
		case "retries":
			j["retry"], j["queue"] = 5, "setup"
		case "dead":
			j["retry"], j["queue"] = -1, "setup"
		}
		c.cmd("PUSH", j).ok(t)
	}
	if target == "scheduled" {
		return
	}
	for range jobs {
		got := c.cmd("FETCH", "setup").job(t)
		c.cmd("FAIL", map[string]any{"jid": got["jid"], "errtype": "E", "message": "m"}).ok(t)
	}
}

// listenNoAhead is listen for tests that read the state of jobs made
// pending after fillSet's back-to-back FETCHes: without it the listener
// would count the connection a busy fetcher and could claim such a job
// ahead for its next FETCH (active for up to aheadMaxAge) just before
// the test reads its state. A window of 0 claims only for waiting
// FETCHes.
func listenNoAhead(t *testing.T, change func(*faktory.Config)) (*faktory.Listener, backend.Backend) {
	t.Helper()
	l, store := listen(t, change)
	faktory.SetAheadWindow(l, 0)
	return l, store
}

// stateOf is the kyu state of the job with jid, "gone" when deleted.
func stateOf(t *testing.T, store backend.Backend, jid string) string {
	t.Helper()
	j, err := store.Get(t.Context(), backend.GetParams{JID: jid})
	if errors.Is(err, backend.ErrNotFound) {
		return "gone"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(j.State)
}

func TestMutate(t *testing.T) {
	l, store := listenNoAhead(t, func(c *faktory.Config) {
		c.RetryAt = func(now time.Time, _ int, _ error) time.Time { return now.Add(time.Hour) }
	})
	c := hello(t, l.Addr().String(), "", nil)
	setState := map[string]string{"retries": "retry", "scheduled": "scheduled", "dead": "failed"}
	for _, target := range []string{"retries", "scheduled", "dead"} {
		for _, cmd := range []string{"kill", "requeue", "discard"} {
			prefix := target + "-" + cmd + "-"
			fillSet(t, c, target, prefix)
			want := map[string]string{"kill": "cancelled", "requeue": "pending", "discard": "gone"}[cmd]
			if cmd == "kill" && target == "dead" {
				want = "failed" // dead already
			}
			states := func() string {
				var s []string
				for _, n := range []string{"a", "b", "c"} {
					s = append(s, stateOf(t, store, prefix+n))
				}
				return strings.Join(s, " ")
			}
			in := setState[target]
			steps := []struct {
				filter map[string]any
				want   string
			}{
				// jids win over the other fields, as in Faktory.
				{map[string]any{"jids": []string{prefix + "a", "nosuch"}, "jobtype": "B"}, want + " " + in + " " + in},
				{map[string]any{"jobtype": "B"}, want + " " + want + " " + in},
				{map[string]any{"jobtype": "A", "regexp": `*"uid:2"*`}, want + " " + want + " " + want},
			}
			for i, s := range steps {
				c.cmd("MUTATE", map[string]any{"cmd": cmd, "target": target, "filter": s.filter}).ok(t)
				if got := states(); got != s.want {
					t.Fatalf("%s %s step %d (%v): states %s, want %s", cmd, target, i, s.filter, got, s.want)
				}
			}
			// Clean the queues for the next round.
			c.cmd("QUEUE", "REMOVE default setup").ok(t)
		}
	}
}

func TestMutateRegexpAlone(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	fillSet(t, c, "scheduled", "r-")
	// The glob sees the job as FETCH renders it: its args among the rest
	// (brackets escaped, as [ opens a set).
	c.cmd("MUTATE", map[string]any{"cmd": "requeue", "target": "scheduled", "filter": map[string]any{"regexp": `*"args":\["uid:?"\]*`}}).ok(t)
	for n, want := range map[string]string{"r-a": "scheduled", "r-b": "pending", "r-c": "pending"} {
		if got := stateOf(t, store, n); got != want {
			t.Errorf("%s is %s, want %s", n, got, want)
		}
	}
}

func TestMutateClearAndUnfiltered(t *testing.T) {
	l, store := listenNoAhead(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	fillSet(t, c, "scheduled", "s-")
	fillSet(t, c, "dead", "d-")
	// A filter left out selects the whole set.
	c.cmd("MUTATE", map[string]any{"cmd": "requeue", "target": "dead"}).ok(t)
	c.cmd("MUTATE", map[string]any{"cmd": "clear", "target": "scheduled", "filter": map[string]any{"jobtype": "ignored"}}).ok(t)
	for _, n := range []string{"a", "b", "c"} {
		if got := stateOf(t, store, "s-"+n); got != "gone" {
			t.Errorf("s-%s is %s after clear", n, got)
		}
		if got := stateOf(t, store, "d-"+n); got != "pending" {
			t.Errorf("d-%s is %s after requeue of dead", n, got)
		}
	}
	fillSet(t, c, "scheduled", "t-")
	c.cmd("MUTATE", map[string]any{"cmd": "discard", "target": "scheduled", "filter": map[string]any{}}).ok(t)
	if got := stateOf(t, store, "t-a"); got != "gone" {
		t.Errorf("t-a is %s after discard of the whole set", got)
	}
}

func TestMutateBadRequests(t *testing.T) {
	l, _ := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	for arg, want := range map[string]string{
		`{"cmd":"explode","target":"dead"}`:                    "unknown cmd",
		`{"cmd":"kill","target":"queue"}`:                      "unknown target",
		`{"cmd":"kill","target":"dead","filter":{"jids":"x"}}`: "invalid JSON",
		`{"cmd":"kill"`: "invalid JSON",
		``:              "needs a JSON argument",
	} {
		a := c.cmd("MUTATE", arg)
		if a.kind != '-' || !strings.Contains(a.text, want) {
			t.Errorf("MUTATE %s answered %c%s, want an error with %q", arg, a.kind, a.text, want)
		}
	}
	c.cmd("PUSH", jobJSON("still", "t", nil)).ok(t) // the connection goes on
}

func TestQueueLatency(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	l, _ := listen(t, func(c *faktory.Config) { c.Now = func() time.Time { return time.Unix(0, now.Load()) } })
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("l1", "t", map[string]any{"queue": "a"})).ok(t)
	now.Add(int64(10 * time.Second))
	a := c.cmd("QUEUE", "LATENCY a b")
	var got map[string]float64
	if err := json.Unmarshal(a.bulk, &got); err != nil {
		t.Fatalf("QUEUE LATENCY answered %c%s %s", a.kind, a.text, a.bulk)
	}
	if len(got) != 2 || got["a"] != 10 || got["b"] != 0 {
		t.Fatalf("QUEUE LATENCY a b = %v, want a: 10, b: 0", got)
	}
	if a := c.cmd("QUEUE", "LATENCY *"); a.kind != '-' {
		t.Fatalf("QUEUE LATENCY * answered %c%s", a.kind, a.text)
	}
}
