package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server/api"
)

// TestEnqueueAndGet enqueues with every option through the command line
// and reads the job back as a table and as JSON.
func TestEnqueueAndGet(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		id := strings.TrimSpace(mustKyu(t, url, "enqueue", "email.send", `{"to":"ada@example.com"}`,
			"--queue", "emails", "--priority", "7", "--delay", "1h", "--max-attempts", "3", "--timeout", "2m",
			"--deadline", "2h", "--unique-key", "ada", "--tag", "a", "--tag", "b", "--title", "Mail Ada"))
		if id == "" || strings.ContainsAny(id, " \n") {
			t.Fatalf("enqueue printed %q; want one id", id)
		}

		var j api.Job
		if err := json.Unmarshal([]byte(mustKyu(t, url, "jobs", "get", id, "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.ID != id || j.Type != "email.send" || j.Queue != "emails" || j.Priority != 7 || j.MaxAttempts != 3 ||
			j.State != "scheduled" || j.Title != "Mail Ada" || j.UniqueKey != "ada" || strings.Join(j.Tags, ",") != "a,b" ||
			compact(t, j.Payload) != `{"to":"ada@example.com"}` || j.Deadline.IsZero() || j.Timeout != api.Duration(120e9) {
			t.Fatalf("jobs get -o json = %+v; want the options given", j)
		}

		out := mustKyu(t, url, "jobs", "get", id)
		for _, want := range []string{"FIELD", "VALUE", "id", id, "queue", "emails", "title", "Mail Ada", "state", "scheduled", "attempt", "0 of 3", "payload", `{"to":"ada@example.com"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("jobs get table lacks %q:\n%s", want, out)
			}
		}

		// A duplicate prints the holder's id, says so on stderr, exits 0.
		out, errOut, err := kyuCmd(t, url, "", "enqueue", "email.send", `{}`, "--queue", "emails", "--unique-key", "ada")
		if err != nil || strings.TrimSpace(out) != id || !strings.Contains(errOut, "held by job "+id) {
			t.Fatalf("duplicate enqueue = %q, %q, %v; want the holder's id, a note, no error", out, errOut, err)
		}
		out = mustKyu(t, url, "enqueue", "email.send", `{}`, "--queue", "emails", "--unique-key", "ada", "-o", "json")
		var dup enqueued
		if err := json.Unmarshal([]byte(out), &dup); err != nil || dup.ID != id || !dup.Duplicate {
			t.Fatalf("duplicate enqueue -o json = %q (%v); want the holder's id and duplicate true", out, err)
		}
	})
}

// TestEnqueuePayloads checks the payload forms: JSON, stdin, raw bytes,
// none, and the refusal of what is not JSON.
func TestEnqueuePayloads(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		payloadOf := func(id string) string {
			var j api.Job
			if err := json.Unmarshal([]byte(mustKyu(t, url, "jobs", "get", strings.TrimSpace(id), "-o", "json")), &j); err != nil {
				t.Fatal(err)
			}
			return compact(t, j.Payload) + string(j.PayloadB64)
		}
		out, _, err := kyuCmd(t, url, `{"n":1}`, "enqueue", "count", "-", "-o", "json")
		var res enqueued
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Duplicate || res.State != "pending" {
			t.Fatalf("enqueue from stdin -o json = %q, %v", out, err)
		}
		if got := payloadOf(res.ID); got != `{"n":1}` {
			t.Errorf("payload from stdin = %q", got)
		}
		if got := payloadOf(mustKyu(t, url, "enqueue", "bytes", "not json", "--raw")); got != "not json" {
			t.Errorf("--raw payload = %q", got)
		}
		if got := payloadOf(mustKyu(t, url, "enqueue", "empty")); got != "" {
			t.Errorf("no payload = %q", got)
		}
		for _, args := range [][]string{
			{"enqueue", "bad", "not json"},
			{"enqueue", "bad", "{}", "--run-at", "tomorrow"},
			{"enqueue", "bad", "{}", "--queue", "no spaces"},
			{"enqueue"},
			{"enqueue", "bad", "{}", "-o", "yaml"},
		} {
			_, _, err := kyuCmd(t, url, "", args...)
			var usage *UsageError
			if !errors.As(err, &usage) || ExitCode(err) != ExitUsage {
				t.Errorf("kyu %q = %v; want a usage error", args, err)
			}
		}
	})
}

// compact returns JSON without its white space ("" for none).
func compact(t *testing.T, raw []byte) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return b.String()
}

// TestEnqueueJID enqueues with --jid, reads the job by its jid, and
// checks that a second job with the jid is a duplicate of the first.
func TestEnqueueJID(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, url string) {
		id := strings.TrimSpace(mustKyu(t, url, "enqueue", "invoice.send", `{}`, "--jid", "invoice-42"))
		for _, args := range [][]string{{"invoice-42"}, {"invoice-42", "--jid"}, {id}} {
			var j api.Job
			if err := json.Unmarshal([]byte(mustKyu(t, url, append([]string{"jobs", "get", "-o", "json"}, args...)...)), &j); err != nil {
				t.Fatal(err)
			}
			if j.ID != id || j.JID != "invoice-42" {
				t.Fatalf("jobs get %v = job %s, jid %q; want %s, jid invoice-42", args, j.ID, j.JID, id)
			}
		}
		if out := mustKyu(t, url, "jobs", "get", "invoice-42"); !strings.Contains(out, "jid") || !strings.Contains(out, "invoice-42") {
			t.Errorf("jobs get table lacks the jid:\n%s", out)
		}
		if _, _, err := kyuCmd(t, url, "", "jobs", "get", id, "--jid"); err == nil {
			t.Error("jobs get ID --jid found a job; want none (no job has the id as its jid)")
		}
		out, errOut, err := kyuCmd(t, url, "", "enqueue", "other.type", `{}`, "--queue", "elsewhere", "--jid", "invoice-42")
		if err != nil || strings.TrimSpace(out) != id || !strings.Contains(errOut, `jid "invoice-42" is held by job `+id) {
			t.Fatalf("enqueue with a held jid = %q, %q, %v; want the holder's id and a note on the jid", out, errOut, err)
		}
	})
}
