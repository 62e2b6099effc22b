package redis

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// luaFiles are the scripts' sources. The Lua names keys and header fields
// instead of numbering them: KEY_<name> is the key of that name (KEYS[n]),
// KEYPOS_<name> its position n, F_<name> the position of a header field
// (record.go), LEASE_ANCHOR leaseAnchor, quoted, BARE_MAX_ATTEMPTS
// bareMaxAttempts (record.go), quoted, and BODY_LAST_VERSION
// bodyLastVersion (record.go). loadScripts replaces
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
	commandWorker                                        *script
	register, marker, lead, resign                       *script
	importJobs, importHomes, jidReserve, jidSwap         *script
	enqueueJID, enqueueLean                              *script
	enqueueClaim, claimLean                              *script
	claimPlain, completePlain                            *script
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

// file is the name of the spec's Lua file: a script whose name ends in
// " plain" is another script's lines (the name without it) in a form
// that takes fewer keys, the others' KEY_ names being nil.
func (sp scriptSpec) file() string {
	return strings.TrimSuffix(sp.name, " plain")
}

// specs is the table of every script, whose built forms go to s.
func (s *scripts) specs() []scriptSpec {
	return []scriptSpec{
		// The enqueue script takes only the keys it touches: a single
		// enqueue is a call of its own, and the other 11 keys would cost
		// it about a tenth of its time. Its calls whose jobs have no JID
		// leave out the JID index too; those of "enqueue jid", the same
		// run (enqueueJobs in common.lua), pass it.
		{&s.enqueue, "enqueue", true, []string{"jobs", "ready", "waiting", "deadlines", "unique", "unique_ends", "queue_name", "in_s"}},
		{&s.enqueueJID, "enqueue jid", true, []string{"jobs", "ready", "waiting", "deadlines", "unique", "unique_ends", "queue_name", "in_s", "jids"}},
		// "enqueue lean" is the same run for calls whose jobs are all
		// pending, with no deadline, unique key or JID (most single
		// enqueues): they touch only these three keys, and each key or
		// argument left out saves Redis about a thousand instructions of
		// a call's 82,000. Its own lines pass only what such jobs need.
		// It is standalone (scriptSpec.standalone).
		{&s.enqueueLean, "enqueue lean", true, []string{"jobs", "ready", "queue_name"}},
		// "enqueue claim" is "enqueue lean" with the claim of a waiting
		// claim behind it, in one run (handoff.go): it takes the keys
		// both touch for such a claim, 9 of the claim script's 20.
		{&s.enqueueClaim, "enqueue claim", true, []string{"jobs", "errors", "ready", "waiting", "leases", "deadlines", "unique", "queue_name", "settings"}},
		// "claim lean" is the claim script for a waiting claim's look
		// (waitclaim.go), with the keys of "enqueue claim"'s claim.
		{&s.claimLean, "claim lean", true, []string{"jobs", "errors", "ready", "waiting", "leases", "deadlines", "unique", "queue_name", "settings"}},
		{&s.claim, "claim", true, nil},
		// "claim plain" is claim.lua for a claim with no type filter and
		// no byte budget, as a draining worker makes, with the keys such
		// a claim touches when nothing is due to cancel or promote (the
		// keys of "claim lean"); it leaves a claim that has such work to
		// claim.lua (see its top). Each key left out saves Redis about
		// 1,300 instructions of a call.
		{&s.claimPlain, "claim plain", true, []string{"jobs", "errors", "ready", "waiting", "leases", "deadlines", "unique", "queue_name", "settings"}},
		{&s.heartbeat, "heartbeat", true, nil},
		{&s.complete, "complete", true, nil},
		// "complete plain" is complete.lua for calls that store no
		// results, with the keys of its short way only; it leaves a call
		// with a job that needs more to complete.lua (see its top).
		{&s.completePlain, "complete plain", true, []string{"jobs", "leases", "final", "in_c", "settings", "minutes"}},
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
		{&s.importJobs, "import", true, nil},
		{&s.registerWorker, "register worker", false, []string{"workers", "worker_ends", "worker_cmds"}},
		{&s.deregisterWorker, "deregister worker", false, []string{"workers", "worker_ends", "worker_cmds"}},
		{&s.commandWorker, "command worker", false, []string{"workers", "worker_ends", "worker_cmds"}},
		{&s.register, "register", false, []string{"queues", "queue_names", "meta"}},
		{&s.marker, "marker", false, []string{"meta"}},
		// lease is the lease hash of the name asked for (keys.leader).
		{&s.lead, "lead", false, []string{"lease"}},
		{&s.resign, "resign", false, []string{"lease"}},
		{&s.importHomes, "import homes", false, []string{"homes"}},
		// The store-wide JID index on a Cluster (jid.go).
		{&s.jidReserve, "jid reserve", false, []string{"jids"}},
		{&s.jidSwap, "jid swap", false, []string{"jids"}},
	}
}

// standalone reports whether a per-queue script goes without common.lua:
// its KEYS are its keys alone, in its order (its KEY_ names stand for
// those), so neither its calls nor its function build a table of the
// queue's key positions (keysTable), and its function runs no reset; its
// source starts with standaloneHead instead. Of a single enqueue's 57,200
// Redis instructions, the table took 2,000 and reset 6,300
// (TestCallgrindLone). Only "enqueue lean" is: the lone call's script,
// which needs nothing of common.lua's but what it writes out.
func (sp scriptSpec) standalone() bool {
	return sp.perQueue && sp.name == "enqueue lean"
}

// resetsLate reports whether a per-queue script starts its run itself
// (reset in common.lua) after a fast path that needs nothing of a run's
// state, instead of its function doing so first, which replaces the
// tables the previous run (a completion, a claim) left filled: "enqueue
// claim", whose idle lone job is written claimed in four commands, and
// "claim lean", whose look at an idle queue finds nothing in two. An
// idle job's enqueue and claim went from about 82,000 Redis instructions
// to 73,000 (TestCallgrindIdle).
func (sp scriptSpec) resetsLate() bool {
	return sp.perQueue && (sp.name == "enqueue claim" || sp.name == "claim lean")
}

// standaloneHead precedes a standalone script's lines: the wake channels
// it worked out, by jobs key, which a function library keeps from call to
// call (see lua/enqueue_lean.lua).
const standaloneHead = "local wakes, wakeCount = {}, 0\n"

// script is a Lua script, run as a function of the library (FCALL; see
// library) or, on servers without functions, by EVALSHA (EVAL when the
// server does not have it yet).
type script struct {
	name string
	// head is what precedes body in the script's source (src): common.lua
	// for a per-queue script, after the keys table for one with slots.
	// Kept apart, the scripts share one copy of common.lua.
	head string
	// body is the script's own lines, which the library runs (newLibrary).
	body string
	// sha is the SHA1 of src (hex), for EVALSHA; worked out at the first
	// call that needs it, since a server with functions needs none.
	sha func() string
	// keys names the keys a call passes, in order: a queue's keys
	// (queueKeys.key) for a per-queue script, store-wide ones
	// (keys.named) for the others.
	keys []string
	// slots, when set, are the only positions of queueKeyNames the
	// script takes (its keys): its calls pass just those keys, and the
	// script puts each back at its position in KEYS (keysTable), unless
	// it is standalone.
	slots []int
	// standalone is set for a script of a standalone spec
	// (scriptSpec.standalone).
	standalone bool
	// lateReset is set for a script that starts its run itself
	// (scriptSpec.resetsLate): its function does not.
	lateReset bool
}

// newScript builds a script whose source is head followed by body.
func newScript(name, head, body string) *script {
	return &script{name: name, head: head, body: body, sha: sync.OnceValue(func() string {
		h := sha1.New()
		io.WriteString(h, head)
		io.WriteString(h, body)
		return hex.EncodeToString(h.Sum(nil))
	})}
}

// src is the script's whole source, for EVAL.
func (sc *script) src() string { return sc.head + sc.body }

// storeKeys is the store-wide keys a script that is not per queue takes.
func (sc *script) storeKeys(k keys) []string {
	out := make([]string, len(sc.keys))
	for i, name := range sc.keys {
		out[i] = k.named(name)
	}
	return out
}

// leaseKeys is storeKeys for a script that takes the lease hash of the
// lease named lease (keys.leader) as its key "lease".
func (sc *script) leaseKeys(k keys, lease string) []string {
	out := sc.storeKeys(k)
	for i, name := range sc.keys {
		if name == "lease" {
			out[i] = k.leader(lease)
		}
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
		if sp.perQueue && !sp.standalone() {
			names = queueNames
		}
		body, err := readLua(sp.file(), names)
		if err != nil {
			return nil, err
		}
		var sc *script
		switch {
		case !sp.perQueue:
			sc = newScript(sp.name, "", body)
			sc.keys = sp.keys
		case sp.keys == nil:
			sc = newScript(sp.name, common, body)
			sc.keys = queueNames
		case sp.standalone():
			slots, err := positions(sp.keys, queueNames)
			if err != nil {
				return nil, fmt.Errorf("script %s: %w", sp.name, err)
			}
			sc = newScript(sp.name, standaloneHead, body)
			sc.keys, sc.slots, sc.standalone = sp.keys, slots, true
		default:
			slots, err := positions(sp.keys, queueNames)
			if err != nil {
				return nil, fmt.Errorf("script %s: %w", sp.name, err)
			}
			sc = newScript(sp.name, "local KEYS = "+keysTable("KEYS", slots)+"\n"+common, body)
			sc.keys, sc.slots = sp.keys, slots
		}
		sc.lateReset = sp.resetsLate()
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
		p := slices.Index(all, n)
		if p < 0 || (i > 0 && p+1 <= out[i-1]) {
			return nil, fmt.Errorf("key %q is not a queue key in queue order", n)
		}
		out[i] = p + 1
	}
	return out, nil
}

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
// keys being keyNames in order. Any word of that shape (capitals, an
// underscore, more) that it does not know is an error, so a misspelt
// name or prefix does not reach Redis as a global that is nil.
func substitute(src string, keyNames []string) (string, error) {
	var b strings.Builder
	b.Grow(len(src))
	var bad []string
	for i := 0; i < len(src); {
		j := i + 1
		for j < len(src) && isWordByte(src[j]) == isWordByte(src[i]) {
			j++
		}
		word := src[i:j]
		i = j
		if !isWordByte(word[0]) {
			b.WriteString(word)
			continue
		}
		rep, known := nameValue(word, keyNames)
		if !known {
			bad = append(bad, word)
		}
		b.WriteString(rep)
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown names %v (keys: %v)", bad, keyNames)
	}
	return b.String(), nil
}

// nameValue is what substitute writes for a word: the word itself unless
// it has a name's shape, and whether it knows the word.
func nameValue(word string, keyNames []string) (string, bool) {
	switch word {
	case "LEASE_ANCHOR":
		return "'" + leaseAnchor + "'", true
	case "BARE_MAX_ATTEMPTS":
		return "'" + strconv.Itoa(bareMaxAttempts) + "'", true
	case "BODY_LAST_VERSION":
		return strconv.Itoa(bodyLastVersion), true
	}
	kind, name, ok := strings.Cut(word, "_")
	if !ok || name == "" || !isNamePrefix(kind) {
		return word, true
	}
	switch kind {
	case "F":
		if n, ok := headerField(name); ok {
			return strconv.Itoa(n), true
		}
	case "KEY", "KEYPOS":
		if p := slices.Index(keyNames, name); p >= 0 {
			if kind == "KEY" {
				return "KEYS[" + strconv.Itoa(p+1) + "]", true
			}
			return strconv.Itoa(p + 1), true
		}
	}
	return word, false
}

// isNamePrefix reports whether s is a capital followed by capitals and
// digits, as the part of a name before its first underscore is.
func isNamePrefix(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if (s[i] < 'A' || s[i] > 'Z') && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// isWordByte reports whether c can be part of a Lua name or number.
func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
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
// (reset) if the script starts with common.lua and does not start it
// itself (scriptSpec.resetsLate), and runs the script's body. A script
// without common.lua (a store-wide or standalone one) cannot use its
// run's state: its source by EVALSHA lacks it. The
// standalone scripts' head (standaloneHead) comes once, after common.
func newLibrary(common string, scripts ...*script) *library {
	common += "memoize = true\n"
	var b strings.Builder
	b.WriteString("local KEYS, ARGV\n")
	b.WriteString(common)
	b.WriteString(standaloneHead)
	sum := sha1.New()
	io.WriteString(sum, common)
	io.WriteString(sum, standaloneHead)
	for _, sc := range scripts {
		fmt.Fprintf(sum, "\x00%s\x00%v\x00%v\x00%v\x00%s", sc.name, sc.slots, sc.standalone, sc.lateReset, sc.body)
	}
	tag := hex.EncodeToString(sum.Sum(nil))[:16]
	l := &library{name: "kyu_" + tag, fn: make(map[*script]string, len(scripts))}
	for _, sc := range scripts {
		fn := "kyu_" + strings.ReplaceAll(sc.name, " ", "_") + "_" + tag
		l.fn[sc] = fn
		ks := "keys"
		if sc.slots != nil && !sc.standalone {
			ks = keysTable("keys", sc.slots)
		}
		reset := "reset()\n"
		if sc.head == "" || sc.standalone || sc.lateReset {
			reset = ""
		}
		b.WriteString("\nredis.register_function('" + fn + "', function(keys, args)\nKEYS, ARGV = " + ks + ", args\n" + reset)
		b.WriteString(sc.body)
		b.WriteString("\nend)\n")
	}
	l.src = "#!lua name=" + l.name + "\n" + b.String()
	return l
}
