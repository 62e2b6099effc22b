package redis

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// luaFiles are the scripts' sources. The Lua names keys and header fields
// instead of numbering them: KEY_<name> is the key of that name (KEYS[n]),
// KEYPOS_<name> its position n, F_<name> the position of a header field
// (record.go) and LEASE_ANCHOR leaseAnchor, quoted. loadScripts replaces
// the names when a store opens.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// scripts are the store's Lua scripts, built once by loadScripts when the
// store opens.
type scripts struct {
	enqueue, claim, heartbeat, complete, fail, release   *script
	get, list, delete, cancel, retry, runNow, retryQueue *script
	purge, report, updateQueue, stats, promote, recover  *script
	retention, registerWorker, deregisterWorker          *script
	register, marker                                     *script
	// lib is every script as one function library.
	lib *library
}

// scriptSpec declares one script: its name, and the names of the keys it
// takes, in the order a call passes them. The Lua file is lua/<name>.lua
// (spaces as underscores). The substitution and every call take the keys
// from here (script.keys), so the two cannot disagree.
type scriptSpec struct {
	dst  **script
	name string
	// perQueue scripts start with common.lua and name the keys of one
	// queue (queueKeyNames) by their positions there; keys, when set,
	// are the ones a call passes (a subset, in that order).
	perQueue bool
	keys     []string
}

// specs is the table of every script, whose built forms go to s.
func (s *scripts) specs() []scriptSpec {
	return []scriptSpec{
		// The enqueue script takes only the keys it touches: a single
		// enqueue is a call of its own, and the other 11 keys would cost
		// it about a tenth of its time.
		{&s.enqueue, "enqueue", true, []string{"jobs", "ready", "waiting", "deadlines", "unique", "unique_ends", "queue_name", "in_s"}},
		{&s.claim, "claim", true, nil},
		{&s.heartbeat, "heartbeat", true, nil},
		{&s.complete, "complete", true, nil},
		{&s.fail, "fail", true, nil},
		{&s.release, "release", true, nil},
		{&s.get, "get", true, nil},
		{&s.list, "list", true, nil},
		{&s.delete, "delete", true, nil},
		{&s.cancel, "cancel", true, nil},
		{&s.retry, "retry", true, nil},
		{&s.runNow, "run now", true, nil},
		{&s.retryQueue, "retry queue", true, nil},
		{&s.purge, "purge", true, nil},
		{&s.report, "report", true, nil},
		{&s.updateQueue, "update queue", true, nil},
		{&s.stats, "stats", true, nil},
		{&s.promote, "promote", true, nil},
		{&s.recover, "recover", true, nil},
		{&s.retention, "retention", true, nil},
		{&s.registerWorker, "register worker", false, []string{"workers", "worker_ends"}},
		{&s.deregisterWorker, "deregister worker", false, []string{"workers", "worker_ends"}},
		{&s.register, "register", false, []string{"queues", "queue_names", "meta"}},
		{&s.marker, "marker", false, []string{"meta"}},
	}
}

// script is a Lua script with its SHA1, run as a function of the library
// (FCALL; see library) or, on servers without functions, by EVALSHA (EVAL
// when the server does not have it yet).
type script struct {
	name string
	src  string
	sha  string
	// body is src without common.lua, for the library (newLibrary).
	body string
	// keys names the keys a call passes, in order: a queue's keys
	// (queueKeys.key) for a per-queue script, store-wide ones
	// (keys.named) for the others.
	keys []string
	// slots, when set, are the only positions of queueKeyNames the
	// script takes (its keys): its calls pass just those keys, and the
	// script puts each back at its position in KEYS (keysTable).
	slots []int
}

// storeKeys is the store-wide keys a script that is not per queue takes.
func (sc *script) storeKeys(k keys) []string {
	out := make([]string, len(sc.keys))
	for i, name := range sc.keys {
		out[i] = k.named(name)
	}
	return out
}

// loadScripts reads the Lua files and builds the scripts and the library.
// It fails when a file is missing or names a key or field that its
// script does not have.
func loadScripts() (*scripts, error) {
	queueNames := queueKeyNames()
	common, err := readLua("common", queueNames)
	if err != nil {
		return nil, err
	}
	s := &scripts{}
	var all []*script
	for _, sp := range s.specs() {
		names := sp.keys
		if sp.perQueue {
			names = queueNames
		}
		body, err := readLua(sp.name, names)
		if err != nil {
			return nil, err
		}
		var sc *script
		switch {
		case !sp.perQueue:
			sc = rawScript(sp.name, body)
			sc.keys = sp.keys
		case sp.keys == nil:
			sc = rawScript(sp.name, common+body)
			sc.body, sc.keys = body, queueNames
		default:
			slots, err := positions(sp.keys, queueNames)
			if err != nil {
				return nil, fmt.Errorf("script %s: %w", sp.name, err)
			}
			sc = rawScript(sp.name, "local KEYS = "+keysTable("KEYS", slots)+"\n"+common+body)
			sc.body, sc.keys, sc.slots = body, sp.keys, slots
		}
		*sp.dst = sc
		all = append(all, sc)
	}
	s.lib = newLibrary(common, all...)
	return s, nil
}

// positions is where each of names is in all (1-based, ascending).
func positions(names, all []string) ([]int, error) {
	out := make([]int, len(names))
	for i, n := range names {
		p := indexOf(all, n)
		if p < 0 || (i > 0 && p+1 <= out[i-1]) {
			return nil, fmt.Errorf("key %q is not a queue key in queue order", n)
		}
		out[i] = p + 1
	}
	return out, nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// placeholder matches the names substitute replaces; leftover matches any
// name of that shape, so a misspelt prefix is caught too.
var (
	placeholder = regexp.MustCompile(`\b(KEY|KEYPOS|F)_([a-z0-9_]+)\b|\bLEASE_ANCHOR\b`)
	leftover    = regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Za-z0-9_]+\b`)
)

// readLua reads lua/<name>.lua and substitutes its names, the keys
// being keyNames in order.
func readLua(name string, keyNames []string) (string, error) {
	file := "lua/" + strings.ReplaceAll(name, " ", "_") + ".lua"
	b, err := luaFiles.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read script %s: %w", name, err)
	}
	out, err := substitute(string(b), keyNames)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// substitute replaces the names of src (see luaFiles) in one pass, the
// keys being keyNames in order. It fails on a name it does not know.
func substitute(src string, keyNames []string) (string, error) {
	var bad []string
	out := placeholder.ReplaceAllStringFunc(src, func(m string) string {
		if m == "LEASE_ANCHOR" {
			return "'" + leaseAnchor + "'"
		}
		kind, name, _ := strings.Cut(m, "_")
		if kind == "F" {
			if n, ok := headerField(name); ok {
				return strconv.Itoa(n)
			}
		} else if p := indexOf(keyNames, name); p >= 0 {
			if kind == "KEY" {
				return "KEYS[" + strconv.Itoa(p+1) + "]"
			}
			return strconv.Itoa(p + 1)
		}
		bad = append(bad, m)
		return m
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown names %v (keys: %v)", bad, keyNames)
	}
	if m := leftover.FindString(out); m != "" {
		return "", fmt.Errorf("unknown name %s", m)
	}
	return out, nil
}

// headerField is the position of the header field a script names
// F_<name> (the h* constants of record.go).
func headerField(name string) (int, bool) {
	switch name {
	case "state":
		return hState, true
	case "attempt":
		return hAttempt, true
	case "max_attempts":
		return hMaxAttempts, true
	case "token":
		return hToken, true
	case "priority":
		return hPriority, true
	case "run_at":
		return hRunAt, true
	case "deadline":
		return hDeadline, true
	case "lease_exp":
		return hLeaseExp, true
	case "started":
		return hStarted, true
	case "finished":
		return hFinished, true
	case "worker":
		return hWorker, true
	case "cancel":
		return hCancel, true
	case "unique_len":
		return hUniqueLen, true
	case "retention":
		return hRetention, true
	}
	return 0, false
}

// keysTable is a Lua table constructor that puts the keys of the list
// named v, which holds the keys at slots, back at their positions
// (positions not in slots are nil).
func keysTable(v string, slots []int) string {
	var b strings.Builder
	b.WriteString("{")
	k := 0
	for pos := 1; pos <= slots[len(slots)-1]; pos++ {
		if pos > 1 {
			b.WriteString(", ")
		}
		if slots[k] == pos {
			k++
			b.WriteString(v + "[" + strconv.Itoa(k) + "]")
		} else {
			b.WriteString("nil")
		}
	}
	b.WriteString("}")
	return b.String()
}

// slotKeys picks the keys of a script with slots from the queue's whole
// list (queueKeys.all).
func slotKeys(all []string, slots []int) []string {
	out := make([]string, len(slots))
	for i, pos := range slots {
		out[i] = all[pos-1]
	}
	return out
}

// rawScript builds a script from its whole source.
func rawScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), body: src}
}

// library is the scripts as one Redis Functions library (FUNCTION LOAD,
// then FCALL). Its functions skip what every EVALSHA of a script pays:
// running common.lua's definitions, some thirty closures and tables, on
// every call. The library and its function names carry the SHA1 of its
// source, so builds with different scripts share a server without
// replacing each other's functions.
type library struct {
	name string
	src  string
	fn   map[*script]string
}

// newLibrary builds the library of scripts: common (common.lua) once,
// with memoize set (see parsedActive), then one function per script that
// sets KEYS and ARGV (upvalues here, not globals), starts a fresh run
// (reset) and runs the script's body.
func newLibrary(common string, scripts ...*script) *library {
	common += "memoize = true\n"
	var b strings.Builder
	b.WriteString("local KEYS, ARGV\n")
	b.WriteString(common)
	sum := sha1.New()
	sum.Write([]byte(common))
	for _, sc := range scripts {
		sum.Write([]byte(sc.src))
	}
	tag := hex.EncodeToString(sum.Sum(nil))[:16]
	l := &library{name: "kyu_" + tag, fn: make(map[*script]string, len(scripts))}
	for _, sc := range scripts {
		fn := "kyu_" + strings.ReplaceAll(sc.name, " ", "_") + "_" + tag
		l.fn[sc] = fn
		ks := "keys"
		if sc.slots != nil {
			ks = keysTable("keys", sc.slots)
		}
		b.WriteString("\nredis.register_function('" + fn + "', function(keys, args)\nKEYS, ARGV = " + ks + ", args\nreset()\n")
		b.WriteString(sc.body)
		b.WriteString("\nend)\n")
	}
	l.src = "#!lua name=" + l.name + "\n" + b.String()
	return l
}
