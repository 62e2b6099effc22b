package faktory

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// FuzzParseCommand feeds arbitrary lines to the command parser: it must
// never panic, and a PUSH it accepts and maps onto a kyu job must map
// back to the same Faktory fields.
func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		`PUSH {"jid":"a","jobtype":"t","args":[1]}`,
		`PUSH {"jid":"a","jobtype":"t","args":[],"queue":"q","retry":-1,"priority":9,"reserve_for":60,"custom":{"x":[1,{"y":null}]},"at":"2030-01-01T00:00:00Z","backtrace":3,"created_at":"x"}`,
		`PUSH {"jid":"a","jobtype":"t","args":[],"retry":0}`,
		`PUSHB [{"jid":"a","jobtype":"t","args":[]},{"jid":"b"}]`,
		`FETCH critical default  low`,
		`FETCH`,
		`ACK {"jid":"a"}`,
		`ACK {"jid":""}`,
		`FAIL {"jid":"a","errtype":"E","message":"m","backtrace":["1","2"]}`,
		`BEAT {"wid":"w","current_state":"quiet","rss_kb":1}`,
		`HELLO {"v":2,"wid":"w","labels":["a"],"pid":1,"hostname":"h","pwdhash":"00"}`,
		`END`,
		`INFO`,
		`FLUSH`,
		`QUEUE PAUSE a b`,
		`QUEUE remove *`,
		`QUEUE`,
		`QUEUE LATENCY a b`,
		`MUTATE {"cmd":"kill","target":"retries","filter":{"jobtype":"t","jids":["a"],"regexp":"*x[a-c]?\\*"}}`,
		`MUTATE {"cmd":"clear","target":"dead"}`,
		`MUTATE {"cmd":"kill","target":"queue"}`,
		`PUSH`,
		`PUSH {} {}`,
		`PUSH {"args":"[]"}`,
		"NOPE x",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		// The line reader takes the line back whole, or refuses it.
		r := bufio.NewReaderSize(strings.NewReader(line+"\r\n"), 16)
		got, err := readLine(r, 1<<20)
		if err == nil && !strings.ContainsAny(line, "\r\n") && got != line {
			t.Fatalf("readLine gave %q for %q", got, line)
		}
		cmd, err := parseCommand(line)
		if err == nil && cmd.verb == verbMutate && cmd.mutate.Filter != nil {
			// The glob matcher takes any pattern; one without special
			// bytes matches exactly itself.
			p := cmd.mutate.Filter.Regexp
			for _, subject := range []string{p, line, p + "x"} {
				if !strings.ContainsAny(p, "*?[\\") && globMatch(p, subject) != (subject == p) {
					t.Fatalf("plain pattern %q against %q: %v", p, subject, !(subject == p))
				}
			}
		}
		if err != nil || (cmd.verb != verbPush && cmd.verb != verbPushB) {
			return
		}
		for _, w := range cmd.jobs {
			j, err := w.newJob()
			if err != nil {
				continue
			}
			back := wireOf(j.Record("id-1", time.Unix(1e9, 0)))
			wantRetry := 25
			if w.Retry != nil {
				wantRetry = max(*w.Retry, -1)
			}
			if back.Type != w.Type || *back.Retry != wantRetry || (w.Priority != 0 && back.Priority != w.Priority) {
				t.Fatalf("round trip of %+v gave %+v", w, back)
			}
			if w.JID != "" && back.JID != w.JID {
				t.Fatalf("jid %q came back as %q", w.JID, back.JID)
			}
		}
	})
}
