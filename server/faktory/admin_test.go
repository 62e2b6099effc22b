package faktory_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/faktory"
)

func TestInfo(t *testing.T) {
	l, _ := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("i1", "t", map[string]any{"queue": "a"})).ok(t)
	c.cmd("PUSH", jobJSON("i2", "t", map[string]any{"queue": "a"})).ok(t)
	c.cmd("PUSH", jobJSON("i3", "t", map[string]any{"queue": "b", "at": "2099-01-01T00:00:00Z"})).ok(t)
	a := c.cmd("INFO", nil)
	var info struct {
		Faktory struct {
			Queues        map[string]int64 `json:"queues"`
			Sets          map[string]int64 `json:"sets"`
			TotalEnqueued int64            `json:"total_enqueued"`
		} `json:"faktory"`
		Server struct {
			Description string `json:"description"`
		} `json:"server"`
	}
	if err := json.Unmarshal(a.bulk, &info); err != nil {
		t.Fatalf("INFO answered %c%s %s: %v", a.kind, a.text, a.bulk, err)
	}
	if info.Faktory.Queues["a"] != 2 || info.Faktory.TotalEnqueued != 2 || info.Faktory.Sets["scheduled"] != 1 || info.Server.Description != "kyu" {
		t.Fatalf("INFO %s", a.bulk)
	}
}

func TestQueuePauseResumeRemove(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("p1", "t", map[string]any{"queue": "a"})).ok(t)
	c.cmd("QUEUE", "PAUSE a").ok(t)
	if a := c.cmd("FETCH", "a"); a.bulk != nil {
		t.Fatalf("FETCH from a paused queue got %s", a.bulk)
	}
	c.cmd("QUEUE", "RESUME *").ok(t)
	got := c.cmd("FETCH", "a").job(t)
	c.cmd("ACK", map[string]any{"jid": got["jid"]}).ok(t)

	c.cmd("PUSH", jobJSON("p2", "t", map[string]any{"queue": "a"})).ok(t)
	c.cmd("QUEUE", "REMOVE a").ok(t)
	if _, err := store.Get(t.Context(), backend.GetParams{JID: "p2"}); err == nil {
		t.Fatal("QUEUE REMOVE left a pending job")
	}
	if a := c.cmd("QUEUE", "FROB a"); a.kind != '-' {
		t.Fatalf("QUEUE FROB answered %c%s", a.kind, a.text)
	}
}

func TestFlush(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("f1", "t", nil)).ok(t)
	if a := c.cmd("FLUSH", nil); a.kind != '-' || !strings.Contains(a.text, "allow-flush") {
		t.Fatalf("FLUSH without AllowFlush answered %c%s", a.kind, a.text)
	}
	if _, err := store.Get(t.Context(), backend.GetParams{JID: "f1"}); err != nil {
		t.Fatal("a refused FLUSH deleted a job")
	}

	l2, store2 := listen(t, func(c *faktory.Config) { c.AllowFlush = true })
	c2 := hello(t, l2.Addr().String(), "", nil)
	c2.cmd("PUSH", jobJSON("g1", "t", nil)).ok(t)
	c2.cmd("PUSH", jobJSON("g2", "t", map[string]any{"queue": "x", "at": "2099-01-01T00:00:00Z"})).ok(t)
	c2.cmd("FLUSH", nil).ok(t)
	st, err := store2.Stats(t.Context(), backend.StatsParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		for s, n := range q.Counts {
			if n != 0 {
				t.Fatalf("after FLUSH queue %s holds %d %s", q.Name, n, s)
			}
		}
	}
}
