package redis

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leftover matches a word with a name's shape (see substitute).
var leftover = regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Za-z0-9_]+\b`)

// TestScriptsLoad: every script loads, every name in the Lua is replaced,
// and no file numbers keys or header fields itself.
func TestScriptsLoad(t *testing.T) {
	t.Parallel()
	scs, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range scs.specs() {
		sc := *sp.dst
		if sc == nil || sc.body == "" {
			t.Fatalf("script %s not built", sp.name)
		}
		if m := leftover.FindString(sc.src()); m != "" {
			t.Errorf("script %s keeps the name %s", sc.name, m)
		}
		if scs.lib.fn[sc] == "" {
			t.Errorf("script %s has no function in the library", sc.name)
		}
	}
	if m := leftover.FindString(scs.lib.src); m != "" {
		t.Errorf("the library keeps the name %s", m)
	}
	numbered := regexp.MustCompile(`KEYS\[\d|\bh\[\d`)
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	// A plain form runs another script's file (scriptSpec.file).
	lua := map[string]bool{}
	for _, sp := range scs.specs() {
		lua[sp.file()] = true
	}
	if err != nil || len(files) != len(lua)+1 {
		t.Fatalf("lua files %v, %v; want one per script and common.lua", files, err)
	}
	for _, f := range files {
		b, _ := luaFiles.ReadFile(f)
		for i, line := range strings.Split(string(b), "\n") {
			// copyHeader and encode take every field in order, and load
			// the capture after them.
			if f == "lua/common.lua" && (strings.Contains(line, "h[1], h[2]") ||
				strings.Contains(line, "h[1] .. '|'") || strings.Contains(line, "'|' .. h[") || strings.Contains(line, "h[15]")) {
				continue
			}
			if numbered.MatchString(line) {
				t.Errorf("%s:%d numbers a key or field: %s", f, i+1, line)
			}
		}
		if f != "lua/common.lua" {
			head, _, _ := strings.Cut(string(b), "\n\n")
			for _, w := range []string{"KEYS", "ARGV", "Returns"} {
				if !strings.Contains(head, w) {
					t.Errorf("%s: the header comment does not give %s", f, w)
				}
			}
		}
	}
}

// TestScriptKeysPassed: every key a script's own lines name is among
// the keys its calls pass, and the calls pass each key at its position.
func TestScriptKeysPassed(t *testing.T) {
	t.Parallel()
	scs, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	keyName := regexp.MustCompile(`\bKEY(?:POS)?_([a-z0-9_]+)`)
	k := keys{prefix: "p"}
	q := k.queue(7)
	s := &store{keys: k, scripts: scs}
	for _, sp := range scs.specs() {
		sc := *sp.dst
		b, err := luaFiles.ReadFile("lua/" + strings.ReplaceAll(sp.file(), " ", "_") + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range keyName.FindAllStringSubmatch(string(b), -1) {
			// A plain form's file names the keys of its full form too, on
			// lines the plain form does not run (see TestPlainForms).
			if !slices.Contains(sc.keys, m[1]) && sp.file() == sp.name {
				t.Errorf("script %s names %s, which its calls do not pass (%v)", sc.name, m[0], sc.keys)
			}
		}
		var passed []string
		if sp.perQueue {
			passed = s.keysOf(sc, 7)
		} else {
			passed = sc.leaseKeys(k, "a-lease")
		}
		if len(passed) != len(sc.keys) {
			t.Fatalf("script %s: calls pass %v for %v", sc.name, passed, sc.keys)
		}
		for i, name := range sc.keys {
			want := k.named(name)
			if name == "lease" {
				want = k.leader("a-lease")
			}
			if sp.perQueue {
				want = q.key(name)
			}
			if want == "" || passed[i] != want {
				t.Errorf("script %s: key %d passed is %q, want %s (%q)", sc.name, i+1, passed[i], name, want)
			}
		}
	}
	// A queue's keys in the order of queueKeyNames, as calls pass them;
	// the last, the JID index, is the store-wide one on one server and
	// the queue's own on a Cluster (jid.go).
	want := []string{"jobs", "errors", "results", "ready", "waiting", "leases",
		"deadlines", "final", "unique", "unique-ends", "queue",
		"in:s", "in:r", "in:c", "in:f", "in:x", "settings", "minutes", "reports", "jids"}
	all := q.all()
	if len(all) != len(want) {
		t.Fatalf("queue keys %v, want %d", all, len(want))
	}
	for i, name := range queueKeyNames() {
		w := q.tag + ":" + want[i]
		if name == "jids" {
			w = "{p}:jids"
		}
		if all[i] != w || q.key(name) != all[i] {
			t.Errorf("queue key %d (%s) = %s, want %s", i+1, name, all[i], w)
		}
	}
	if g, w := (keys{prefix: "p", cluster: true}).queue(7).jids(), "{p:7}:jids"; g != w {
		t.Errorf("a queue's JID index on a Cluster is %s, want %s", g, w)
	}
	if g, w := keysTable("k", []int{1, 4, 5}), "{k[1], nil, nil, k[2], k[3]}"; g != w {
		t.Errorf("keysTable = %s, want %s", g, w)
	}
}

// TestSubstitute: names become positions; an unknown name is an error.
func TestSubstitute(t *testing.T) {
	t.Parallel()
	names := []string{"jobs", "in_s"}
	got, err := substitute("redis.call('HGET', KEY_jobs, id) -- KEYPOS_in_s h[F_state] h[F_retention] LEASE_ANCHOR", names)
	want := "redis.call('HGET', KEYS[1], id) -- 2 h[1] h[14] '" + leaseAnchor + "'"
	if err != nil || got != want {
		t.Fatalf("substitute = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"KEY_ready", "KEYPOS_ready", "h[F_colour]", "KEYZ_jobs"} {
		if _, err := substitute("x = "+bad, names); err == nil {
			t.Errorf("substitute(%s) passed", bad)
		}
	}
	if _, err := positions([]string{"in_s", "jobs"}, names); err == nil {
		t.Error("positions out of order passed")
	}
}

// TestHeaderFields: every header field has a name.
func TestHeaderFields(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for _, n := range []string{"state", "attempt", "max_attempts", "token", "priority", "run_at", "deadline",
		"lease_exp", "started", "finished", "worker", "cancel", "unique_len", "retention"} {
		f, ok := headerField(n)
		if !ok || f < 1 || f > headerFields || seen[f] {
			t.Errorf("headerField(%s) = %d, %v", n, f, ok)
		}
		seen[f] = true
	}
	if len(seen) != headerFields {
		t.Errorf("%d fields named, want %d", len(seen), headerFields)
	}
}
