package faktory_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/faktory"
)

func TestHandshakeWithoutPassword(t *testing.T) {
	l, _ := listen(t, nil)
	c, hi := dial(t, l.Addr().String())
	if hi["v"] != float64(2) || hi["s"] != nil || hi["i"] != nil {
		t.Fatalf("greeting %v, want {\"v\":2} alone", hi)
	}
	c.cmd("HELLO", map[string]any{"v": 2}).ok(t)
	// A command before END works; END closes.
	c.cmd("PUSH", jobJSON("j1", "t", nil)).ok(t)
	c.send("END")
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatal("connection still open after END")
	}
}

func TestHandshakePassword(t *testing.T) {
	l, _ := listen(t, func(c *faktory.Config) { c.Password = "pw" })
	// The right hash is taken.
	hello(t, l.Addr().String(), "pw", nil).cmd("PUSH", jobJSON("j1", "t", nil)).ok(t)

	// A wrong one is refused and the connection closed.
	c, hi := dial(t, l.Addr().String())
	if _, ok := hi["s"].(string); !ok || hi["i"].(float64) < 1 {
		t.Fatalf("greeting %v lacks salt and iterations", hi)
	}
	a := c.cmd("HELLO", map[string]any{"v": 2, "pwdhash": faktory.PasswordHash("wrong", hi["s"].(string), int(hi["i"].(float64)))})
	if a.kind != '-' || !strings.Contains(a.text, "Invalid password") {
		t.Fatalf("wrong password answered %c%s", a.kind, a.text)
	}
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatal("connection still open after a wrong password")
	}

	// No hash at all is refused too.
	c, _ = dial(t, l.Addr().String())
	if a := c.cmd("HELLO", map[string]any{"v": 2}); a.kind != '-' {
		t.Fatalf("HELLO without pwdhash answered %c%s", a.kind, a.text)
	}
}

// TestPasswordHash pins the hash to Faktory's definition: SHA-256 of
// password+salt, hashed again until the iteration count, in hex (values
// computed independently with Python's hashlib).
func TestPasswordHash(t *testing.T) {
	for _, c := range []struct {
		iter int
		want string
	}{
		{1, "fe5002e3a1ba48a982f7c31fec72065d1b451547ce2290a766ba477bfec32182"},
		{3, "bb0462622181c8e943c699c65ec9db06c1eac00958e2d80042cf5bea01f05a32"},
	} {
		if got := faktory.PasswordHash("pw", "salt", c.iter); got != c.want {
			t.Errorf("PasswordHash(pw, salt, %d) = %s, want %s", c.iter, got, c.want)
		}
	}
}

func TestPushFetchAck(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", map[string]any{"wid": "w1", "hostname": "h", "pid": 42, "labels": []string{"node"}})
	custom := map[string]any{"n": 1.5, "s": "x", "o": map[string]any{"a": []any{true}}}
	c.cmd("PUSH", jobJSON("jid-1", "Mail", map[string]any{
		"queue": "q1", "retry": 3, "reserve_for": 120, "priority": 9, "custom": custom, "backtrace": 5,
		"created_at": "2020-01-02T03:04:05Z",
	})).ok(t)

	j, err := store.Get(t.Context(), backend.GetParams{JID: "jid-1"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Type != "Mail" || j.Queue != "q1" || j.MaxAttempts != 4 || j.Timeout != 120*time.Second || j.Priority != 100 || string(j.Payload) != `[1,"two"]` || j.ID == "jid-1" {
		t.Fatalf("stored job %+v", j)
	}

	// The queue order is strict: q0 is empty, q1 has the job.
	got := c.cmd("FETCH", "q0 q1").job(t)
	want := map[string]any{"jid": "jid-1", "jobtype": "Mail", "queue": "q1", "retry": float64(3), "reserve_for": float64(120),
		"priority": float64(9), "backtrace": float64(5), "created_at": "2020-01-02T03:04:05Z", "args": []any{float64(1), "two"}}
	for k, v := range want {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(t, v) {
			t.Errorf("fetched %s = %s, want %s", k, g, mustJSON(t, v))
		}
	}
	if g, _ := json.Marshal(got["custom"]); string(g) != mustJSON(t, custom) {
		t.Errorf("custom %s, want %s", g, mustJSON(t, custom))
	}
	// The lease, short at the claim, runs for reserve_for from its
	// extension, which commits just after the answer.
	waitFor(t, "the lease extended to reserve_for", 5*time.Second, func() bool {
		j, _ = store.Get(t.Context(), backend.GetParams{JID: "jid-1"})
		if j.State != backend.StateActive {
			t.Fatalf("claimed job %s", j.State)
		}
		d := j.LeaseExpiresAt.Sub(j.StartedAt)
		return d >= 120*time.Second && d < 125*time.Second
	})

	// ACK on another connection completes it.
	c2 := hello(t, l.Addr().String(), "", nil)
	c2.cmd("ACK", map[string]any{"jid": "jid-1"}).ok(t)
	j, _ = store.Get(t.Context(), backend.GetParams{JID: "jid-1"})
	if j.State != backend.StateCompleted {
		t.Fatalf("after ACK the job is %s", j.State)
	}
	// A second ACK is refused, and nothing waits: FETCH answers nil.
	if a := c2.cmd("ACK", map[string]any{"jid": "jid-1"}); a.kind != '-' {
		t.Fatalf("second ACK answered %c%s", a.kind, a.text)
	}
	if a := c.cmd("FETCH", "q1"); a.kind != '$' || a.bulk != nil {
		t.Fatalf("FETCH of an empty queue answered %c%s %s", a.kind, a.text, a.bulk)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFetchKyuJob fetches a job enqueued through kyu itself (no jid):
// its kyu id is its jid, and ACK by it works.
func TestFetchKyuJob(t *testing.T) {
	l, store := listen(t, nil)
	res, err := store.Enqueue(t.Context(), backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{
		{Type: "native", Payload: []byte(`{"a":1}`), Priority: -50, MaxAttempts: 1, Metadata: map[string]string{"k": "v"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Jobs[0].ID
	c := hello(t, l.Addr().String(), "", nil)
	got := c.cmd("FETCH", "").job(t)
	if got["jid"] != id || got["jobtype"] != "native" || mustJSON(t, got["args"]) != `[{"a":1}]` || got["priority"] != float64(3) ||
		got["retry"] != float64(-1) || mustJSON(t, got["custom"]) != `{"k":"v"}` {
		t.Fatalf("fetched %v", got)
	}
	c.cmd("ACK", map[string]any{"jid": id}).ok(t)
}

// TestAckAfterRestart: a job fetched through one listener is ACKed
// through another that never saw the fetch (as after a restart).
func TestAckAfterRestart(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("r1", "t", nil)).ok(t)
	c.job0(t)
	l2, err := faktory.New(faktory.Config{Backend: store, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer l2.Shutdown(context.Background())
	hello(t, l2.Addr().String(), "", nil).cmd("ACK", map[string]any{"jid": "r1"}).ok(t)
	j, _ := store.Get(t.Context(), backend.GetParams{JID: "r1"})
	if j.State != backend.StateCompleted {
		t.Fatalf("job %s after ACK through a second listener", j.State)
	}
}

// job0 fetches from the default queue and fails unless a job comes.
func (c *fwp) job0(t *testing.T) map[string]any {
	t.Helper()
	return c.cmd("FETCH", "default").job(t)
}

func TestFailRetries(t *testing.T) {
	l, store := listen(t, func(c *faktory.Config) {
		c.RetryAt = func(now time.Time, _ int, _ error) time.Time { return now }
	})
	c := hello(t, l.Addr().String(), "", map[string]any{"wid": "w"})
	c.cmd("PUSH", jobJSON("f1", "t", map[string]any{"retry": 1})).ok(t)
	c.job0(t)
	c.cmd("FAIL", map[string]any{"jid": "f1", "errtype": "RuntimeError", "message": "boom", "backtrace": []string{"a.rb:1", "b.rb:2"}}).ok(t)
	j, _ := store.Get(t.Context(), backend.GetParams{JID: "f1"})
	if j.State != backend.StatePending && j.State != backend.StateRetry {
		t.Fatalf("after one FAIL of two attempts the job is %s", j.State)
	}
	e := j.Errors[0]
	if e.Message != "RuntimeError: boom" || e.Stack != "a.rb:1\nb.rb:2" {
		t.Fatalf("attempt error %+v", e)
	}
	// The retry is fetched with its failure, and a second FAIL ends it.
	got := c.job0(t)
	f, _ := got["failure"].(map[string]any)
	if f["errtype"] != "RuntimeError" || f["message"] != "boom" || f["retry_count"] != float64(0) {
		t.Fatalf("retry fetched with failure %v", got["failure"])
	}
	c.cmd("FAIL", map[string]any{"jid": "f1", "message": "again"}).ok(t)
	j, _ = store.Get(t.Context(), backend.GetParams{JID: "f1"})
	if j.State != backend.StateFailed || len(j.Errors) != 2 {
		t.Fatalf("after two FAILs the job is %s with %d errors", j.State, len(j.Errors))
	}
}

// TestRetryZeroNotKept: retry 0 is one attempt, and the failed job is
// dropped (Faktory discards it); retry -1 keeps it failed (the dead set).
func TestRetryZeroNotKept(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("z", "t", map[string]any{"retry": 0})).ok(t)
	c.cmd("PUSH", jobJSON("m", "t", map[string]any{"retry": -1})).ok(t)
	for range 2 {
		got := c.job0(t)
		c.cmd("FAIL", map[string]any{"jid": got["jid"], "message": "x"}).ok(t)
	}
	if _, err := store.Get(t.Context(), backend.GetParams{JID: "z"}); err == nil {
		t.Fatal("a failed job with retry 0 is kept")
	}
	j, err := store.Get(t.Context(), backend.GetParams{JID: "m"})
	if err != nil || j.State != backend.StateFailed {
		t.Fatalf("a failed job with retry -1: %v %v", j, err)
	}
}

func TestPushBatch(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", nil)
	c.cmd("PUSH", jobJSON("held", "t", nil)).ok(t)
	a := c.cmd("PUSHB", []any{
		jobJSON("b1", "t", nil),
		jobJSON("bad", "t", map[string]any{"priority": 12}),
		jobJSON("held", "t", nil),
		jobJSON("noqueue", "t", map[string]any{"queue": "no spaces"}),
		jobJSON("b2", "t", nil),
	})
	if a.kind != '$' {
		t.Fatalf("PUSHB answered %c%s", a.kind, a.text)
	}
	var refused map[string]string
	if err := json.Unmarshal(a.bulk, &refused); err != nil {
		t.Fatal(err)
	}
	if len(refused) != 3 || refused["bad"] == "" || !strings.HasPrefix(refused["held"], "NOTUNIQUE") || refused["noqueue"] == "" {
		t.Fatalf("PUSHB refused %v", refused)
	}
	for _, jid := range []string{"b1", "b2"} {
		if _, err := store.Get(t.Context(), backend.GetParams{JID: jid}); err != nil {
			t.Fatalf("%s not stored: %v", jid, err)
		}
	}
	// A duplicate PUSH answers NOTUNIQUE.
	if a := c.cmd("PUSH", jobJSON("b1", "t", nil)); a.kind != '-' || !strings.HasPrefix(a.text, "NOTUNIQUE") {
		t.Fatalf("duplicate PUSH answered %c%s", a.kind, a.text)
	}
}

func TestBeatCommands(t *testing.T) {
	l, store := listen(t, nil)
	c := hello(t, l.Addr().String(), "", map[string]any{"wid": "wk", "hostname": "box", "pid": 7, "labels": []string{"ruby"}})
	ws, err := store.Workers(t.Context(), backend.WorkersParams{Now: time.Now()})
	if err != nil || len(ws) != 1 || ws[0].ID != "wk" || ws[0].Host != "box" || ws[0].PID != 7 || ws[0].DeadAt.Sub(ws[0].LastSeen) != 60*time.Second {
		t.Fatalf("registry %+v %v", ws, err)
	}
	// Silent for 60 s, the worker counts as gone.
	if ws, err := store.Workers(t.Context(), backend.WorkersParams{Now: ws[0].LastSeen.Add(61 * time.Second)}); err != nil || len(ws) != 1 || !ws[0].Dead {
		t.Fatalf("registry 61 s after the worker's HELLO: %+v %v; want it listed dead", ws, err)
	}
	c.cmd("BEAT", map[string]any{"wid": "wk"}).ok(t)
	if _, err := store.CommandWorker(t.Context(), backend.CommandWorkerParams{ID: "wk", Command: backend.CommandQuiet, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if a := c.cmd("BEAT", map[string]any{"wid": "wk"}); string(a.bulk) != `{"state":"quiet"}` {
		t.Fatalf("BEAT after quiet answered %c%s %s", a.kind, a.text, a.bulk)
	}
	// A quiet worker is handed nothing.
	c.cmd("PUSH", jobJSON("q", "t", nil)).ok(t)
	if a := c.cmd("FETCH", "default"); a.bulk != nil {
		t.Fatalf("a quiet worker fetched %s", a.bulk)
	}
	if _, err := store.CommandWorker(t.Context(), backend.CommandWorkerParams{ID: "wk", Command: backend.CommandStop, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if a := c.cmd("BEAT", map[string]any{"wid": "wk", "current_state": "quiet"}); string(a.bulk) != `{"state":"terminate"}` {
		t.Fatalf("BEAT after stop answered %c%s %s", a.kind, a.text, a.bulk)
	}
	// END removes the entry.
	c.send("END")
	waitFor(t, "the worker's entry to go", 5*time.Second, func() bool {
		ws, _ := store.Workers(t.Context(), backend.WorkersParams{Now: time.Now()})
		return len(ws) == 0
	})
}

func TestUnknownCommandAndBadLines(t *testing.T) {
	l, _ := listen(t, func(c *faktory.Config) { c.MaxLine = 1024 })
	c := hello(t, l.Addr().String(), "", nil)
	other := hello(t, l.Addr().String(), "", nil)
	if a := c.cmd("FROB", "x"); a.kind != '-' || a.text != "ERR Unknown command FROB" {
		t.Fatalf("unknown command answered %c%s", a.kind, a.text)
	}
	for _, bad := range []string{"PUSH", "PUSH {", "PUSH {} x", "ACK {}", "PUSH []", `PUSH {"jid":"x","jobtype":"t"}`} {
		if a := c.cmd(bad, nil); a.kind != '-' {
			t.Fatalf("%q answered %c%s", bad, a.kind, a.text)
		}
	}
	// An oversized line is refused, and the connection goes on.
	if a := c.cmd("PUSH", jobJSON("big", "t", map[string]any{"args": []string{strings.Repeat("x", 5000)}})); a.kind != '-' || !strings.Contains(a.text, "limit") {
		t.Fatalf("oversized line answered %c%s", a.kind, a.text)
	}
	c.cmd("PUSH", jobJSON("small", "t", nil)).ok(t)
	other.cmd("ACK", map[string]any{"jid": "nope"})
	other.cmd("PUSH", jobJSON("other", "t", nil)).ok(t)
}

// TestShutdownEndsFetch: Shutdown answers a waiting FETCH and closes.
func TestShutdownEndsFetch(t *testing.T) {
	l, _ := listen(t, func(c *faktory.Config) { c.FetchWait = time.Minute })
	c := hello(t, l.Addr().String(), "", nil)
	c.send("FETCH default")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The FETCH either began and answers nil, or came after the stop
	// and finds the connection closed; either way at once.
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := c.r.ReadString('\n')
	if err == nil && line != "$-1\r\n" {
		t.Fatalf("FETCH during shutdown answered %q", line)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatal("shutdown waited for the FETCH")
	}
}

// TestFetchWaitingWhenCommanded: a FETCH already waiting when its worker
// is told to stop (the BEAT on another connection) answers nil at its
// next wake-up rather than hand a job to a worker that is stopping.
func TestFetchWaitingWhenCommanded(t *testing.T) {
	l, store := listen(t, func(c *faktory.Config) { c.FetchWait = 5 * time.Second })
	fields := map[string]any{"wid": "wk"}
	fetcher := hello(t, l.Addr().String(), "", fields)
	beater := hello(t, l.Addr().String(), "", fields)
	fetcher.send("FETCH default")
	// The FETCH waits (had it begun after the command, it would answer
	// nil after FetchWait whatever the fix, and the test pass).
	fetcher.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := fetcher.r.Peek(1); err == nil {
		t.Fatal("FETCH of an empty queue answered at once")
	}
	if _, err := store.CommandWorker(t.Context(), backend.CommandWorkerParams{ID: "wk", Command: backend.CommandStop, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if a := beater.cmd("BEAT", map[string]any{"wid": "wk"}); string(a.bulk) != `{"state":"terminate"}` {
		t.Fatalf("BEAT after stop answered %c%s %s", a.kind, a.text, a.bulk)
	}
	hello(t, l.Addr().String(), "", nil).cmd("PUSH", jobJSON("late", "t", nil)).ok(t)
	if a := fetcher.read(); a.kind != '$' || a.bulk != nil {
		t.Fatalf("the waiting FETCH answered %c%s %s, want nil", a.kind, a.text, a.bulk)
	}
	j, err := store.Get(t.Context(), backend.GetParams{JID: "late"})
	if err != nil || j.State != backend.StatePending {
		t.Fatalf("the job pushed during the stop: %v %v", j, err)
	}
}

// TestFetchWaitingPeerGone: a client that goes away while its FETCH
// waits is not handed the next job (it would stay leased to no one until
// its reserve_for ran out); another worker's FETCH gets it.
func TestFetchWaitingPeerGone(t *testing.T) {
	l, store := listen(t, func(c *faktory.Config) { c.FetchWait = 5 * time.Second })
	gone := hello(t, l.Addr().String(), "", map[string]any{"wid": "gone"})
	gone.send("FETCH default")
	gone.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := gone.r.Peek(1); err == nil {
		t.Fatal("FETCH of an empty queue answered at once")
	}
	gone.nc.Close()
	hello(t, l.Addr().String(), "", nil).cmd("PUSH", jobJSON("j", "t", nil)).ok(t)
	other := hello(t, l.Addr().String(), "", map[string]any{"wid": "other"})
	if got := other.job0(t); got["jid"] != "j" {
		t.Fatalf("the live worker fetched %v", got)
	}
	j, err := store.Get(t.Context(), backend.GetParams{JID: "j"})
	if err != nil || j.Attempt != 1 || j.WorkerID != "other" {
		t.Fatalf("job %+v %v, want its first attempt with the live worker", j, err)
	}
}
