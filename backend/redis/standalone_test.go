package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/redis/rueidis"
)

// TestStandaloneScript: the lone enqueue's script ("enqueue lean") goes
// without common.lua: its KEYS are its own keys in their order, with no
// table of the queue's key positions, and its function starts no run
// (reset), while a script with common.lua does.
func TestStandaloneScript(t *testing.T) {
	t.Parallel()
	scs, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	lean := scs.enqueueLean
	if !lean.standalone || strings.Contains(lean.src(), "local function reset") || strings.Contains(lean.src(), "nil") {
		t.Fatalf("enqueue lean's source has common.lua or a keys table:\n%s", lean.src())
	}
	for i, name := range lean.keys {
		k := "KEYS[" + string(rune('1'+i)) + "]"
		if !strings.Contains(lean.body, k) {
			t.Errorf("enqueue lean does not name key %s (%s) as %s", name, "KEY_"+name, k)
		}
	}
	if strings.Contains(lean.body, "KEYS[4]") {
		t.Error("enqueue lean names a key past its own three")
	}
	head := func(sc *script) string {
		fn := scs.lib.fn[sc]
		_, rest, ok := strings.Cut(scs.lib.src, "redis.register_function('"+fn+"', function(keys, args)\n")
		if !ok {
			t.Fatalf("no function %s in the library", fn)
		}
		return strings.SplitN(rest, "\n", 3)[0] + "\n" + strings.SplitN(rest, "\n", 3)[1]
	}
	if h := head(lean); h != "KEYS, ARGV = keys, args\n"+strings.SplitN(lean.body, "\n", 2)[0] {
		t.Errorf("enqueue lean's function begins\n%s\nwant its keys as passed and no reset", h)
	}
	if h := head(scs.claim); !strings.HasSuffix(h, "\nreset()") {
		t.Errorf("claim's function begins\n%s\nwant a reset", h)
	}
}

// TestLeanWakeChannel: a lone enqueue, whose script works out the queue's
// wake channel from its keys (lua/enqueue_lean.lua), publishes on the
// channel keys.wakeChannel names, for each of two queues in turn and
// again for the first (its channel then comes from the library's cache).
func TestLeanWakeChannel(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	queues := []string{"wake-a", "wake.b", "wake-a"}
	got := make(chan string, 16)
	sub, release := s.client.Dedicate()
	defer release()
	wait := sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { got <- m.Channel }})
	if err := sub.Do(ctx, sub.B().Subscribe().Channel(s.keys.wakeChannel(queues[0]), s.keys.wakeChannel(queues[1])).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		_, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: q}}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ch := <-got:
			if want := s.keys.wakeChannel(q); ch != want {
				t.Fatalf("enqueue into %s woke channel %s, want %s", q, ch, want)
			}
		case err := <-wait:
			t.Fatalf("subscription ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("no wake-up for queue %s", q)
		}
	}
}
