package redis

import (
	"strconv"
	"sync"
)

// Key layout. Every key of one store begins with "{" + prefix, so one
// SCAN pattern finds them all. The keys of a queue share the hash tag
// {prefix:N}, where N is the queue's number in the store's registry (see
// queues.go): a script touches the keys of one queue only, so every script
// runs in one slot and the store works on Redis Cluster. A job's id carries
// its queue's number (see ids.go), so any call naming a job finds its slot
// without a lookup.
//
//	{P}:meta          hash   the marker: kyu=<format version>
//	{P}:queues        hash   queue name -> number
//	{P}:queue-names   hash   number -> queue name
//	{P:N}:jobs        hash   job id -> record (see record.go)
//	{P:N}:errors      hash   job id -> JSON array of the attempts' errors
//	{P:N}:results     hash   job id -> result of a completed job
//	{P:N}:ready       zset   pending jobs; score (MaxPriority-priority)*2^44 + run-at ms
//	{P:N}:waiting     zset   scheduled and retry jobs by run-at ms
//	{P:N}:leases      zset   active jobs by lease expiry ms, and leaseAnchor
//	                         at +inf once a job was claimed
//	{P:N}:deadlines   zset   scheduled, pending and retry jobs that have a deadline, by deadline ms
//	{P:N}:final       zset   final jobs that retention will delete, by deletion time ms
//	{P:N}:unique      hash   unique key -> "holder id|until ms (0: until final)|state"
//	{P:N}:unique-ends zset   unique keys held for a period, by the period's end ms
//	{P:N}:queue       string the queue's name, so a process whose cached
//	                         number is stale (the data was flushed and the
//	                         number given to another queue) finds out
//	{P:N}:in:s        zset   scheduled jobs, score 0, so ZRANGE BYLEX lists
//	{P:N}:in:r               them in id order (UUIDv7: enqueue order); :in:r
//	{P:N}:in:c               retry, :in:c completed, :in:f failed and :in:x
//	{P:N}:in:f               cancelled jobs likewise. Pending and active jobs
//	{P:N}:in:x               have no such set (ready and leases hold them;
//	                         another set would cost ~140 bytes a pending job)
//	{P:N}:settings    hash   paused=1; rc, rf, rx: the retention override per
//	                         final state as the scripts read it (see
//	                         retentionField); tc, tf, tx: the same as Go
//	                         writes it (backend.Retention text)
//	{P:N}:minutes     hash   p:<minute ms>, f:<minute ms>: attempts ended
//	                         (processed, failed) in that minute; p, f: totals
//	{P:N}:reports     hash   <id>:p progress (JSON), <id>:l log lines (JSON
//	                         array), <id>:n "lines kept|lines dropped"
//	{P}:jids          hash   JID -> id of the job holding it (see jid.go);
//	                         on a Cluster "id|c" once the job is written,
//	                         "id|<ms>" while its enqueue is on its way
//	{P:N}:jids        hash   on a Cluster only: JID -> id of this queue's
//	                         job holding it (on one server the scripts
//	                         keep {P}:jids itself, across the slots)
//	{P}:homes         hash   job id -> queue number, for an imported job
//	                         whose id does not carry its queue's number
//	                         (import.go)
//	{P}:workers       hash   worker id -> its entry (JSON backend.WorkerInfo)
//	{P}:worker-ends   zset   worker ids by the entry's expiry ms
//	{P}:leader:<name> hash   a Leader lease: holder, epoch, expires ms (leader.go)
//	{P}:worker-cmds   hash   worker id -> the command on its entry
//	                         (backend.WorkerCommand), gone with the entry
//
// Wake-ups travel on the Pub/Sub channel P:wake:<queue name>; jobs that
// became final or were deleted are announced on {P:N}:done (the message
// is their ids, separated by spaces). Channels are not keys and belong to
// no slot.
type keys struct {
	prefix string
	// cluster is set on a Redis Cluster, where a script keeps to one slot:
	// the scripts of a queue then keep the JIDs of its jobs in the
	// queue's own jids hash instead of the store-wide one (jid.go).
	cluster bool
}

// leaseAnchor is a member the scripts keep in every leases set (score
// +inf, so no lease recovery ever takes it; counts and listings leave it
// out). It is longer than Redis's zset-max-listpack-value (64 bytes by
// default), so the set is a skiplist from its first lease on: a leases
// set holds about as many jobs as the queue's workers run, under the
// listpack limit of 128 entries, where every insert and removal would
// walk the whole listpack. It is no job id (see ids.go).
const leaseAnchor = "~kyu: this member keeps the leases set a skiplist (see keys.go in kyu)~"

// globalTag is the hash tag of the store-wide keys.
func (k keys) globalTag() string { return "{" + k.prefix + "}" }

func (k keys) meta() string       { return k.globalTag() + ":meta" }
func (k keys) queues() string     { return k.globalTag() + ":queues" }
func (k keys) queueNames() string { return k.globalTag() + ":queue-names" }
func (k keys) workers() string    { return k.globalTag() + ":workers" }
func (k keys) workerEnds() string { return k.globalTag() + ":worker-ends" }
func (k keys) workerCmds() string { return k.globalTag() + ":worker-cmds" }
func (k keys) homes() string      { return k.globalTag() + ":homes" }
func (k keys) jids() string       { return k.globalTag() + ":jids" }

// scanPattern matches every key of the store, for tests and tools that
// remove a store.
func (k keys) scanPattern() string {
	return `\{` + escapeGlob(k.prefix) + `[:}]*`
}

// wakeChannel is the Pub/Sub channel announcing pending jobs in queue.
func (k keys) wakeChannel(queue string) string { return k.prefix + ":wake:" + queue }

// wakePattern matches the wake channels of every queue.
func (k keys) wakePattern() string { return escapeGlob(k.prefix) + ":wake:*" }

// donePattern matches the done channels of every queue ({P:N}:done, see
// finalize in lua/common.lua).
func (k keys) donePattern() string { return "{" + escapeGlob(k.prefix) + ":*}:done" }

// doneProbe is on the done pattern but names no queue (queue tags end in
// a number).
func (k keys) doneProbe() string { return "{" + k.prefix + ":probe}:done" }

// queueKeys names the keys of one queue.
type queueKeys struct {
	tag string
	// jidIndex is the JID index the queue's scripts keep: the store-wide
	// one on one server, the queue's own on a Cluster (see keys.cluster).
	jidIndex string
}

func (k keys) queue(num uint32) queueKeys {
	q := queueKeys{tag: "{" + k.prefix + ":" + strconv.FormatUint(uint64(num), 10) + "}"}
	q.jidIndex = k.jids()
	if k.cluster {
		q.jidIndex = q.tag + ":jids"
	}
	return q
}

func (q queueKeys) jobs() string       { return q.tag + ":jobs" }
func (q queueKeys) errors() string     { return q.tag + ":errors" }
func (q queueKeys) results() string    { return q.tag + ":results" }
func (q queueKeys) ready() string      { return q.tag + ":ready" }
func (q queueKeys) waiting() string    { return q.tag + ":waiting" }
func (q queueKeys) leases() string     { return q.tag + ":leases" }
func (q queueKeys) deadlines() string  { return q.tag + ":deadlines" }
func (q queueKeys) final() string      { return q.tag + ":final" }
func (q queueKeys) unique() string     { return q.tag + ":unique" }
func (q queueKeys) uniqueEnds() string { return q.tag + ":unique-ends" }
func (q queueKeys) name() string       { return q.tag + ":queue" }
func (q queueKeys) settings() string   { return q.tag + ":settings" }
func (q queueKeys) minutes() string    { return q.tag + ":minutes" }
func (q queueKeys) reports() string    { return q.tag + ":reports" }
func (q queueKeys) jids() string       { return q.jidIndex }

// in is the id-ordered set of one state's jobs; only scheduled, retry
// and the final states have one (see hasInSet).
func (q queueKeys) in(code string) string { return q.tag + ":in:" + code }

// hasInSet reports whether jobs in the state with this letter (see
// stateCode) are kept in an in set.
func hasInSet(code string) bool {
	return code == "s" || code == "r" || code == "c" || code == "f" || code == "x"
}

// queueKeyNames names the keys of a queue (queueKeys.key) in the order
// the per-queue scripts take them as KEYS; the Lua names each KEY_<name>
// (see luaFiles).
func queueKeyNames() []string {
	return []string{
		"jobs", "errors", "results", "ready", "waiting", "leases",
		"deadlines", "final", "unique", "unique_ends", "queue_name",
		"in_s", "in_r", "in_c", "in_f", "in_x",
		"settings", "minutes", "reports", "jids",
	}
}

// key is the queue's key of one of queueKeyNames ("" for another name).
func (q queueKeys) key(name string) string {
	switch name {
	case "jobs":
		return q.jobs()
	case "errors":
		return q.errors()
	case "results":
		return q.results()
	case "ready":
		return q.ready()
	case "waiting":
		return q.waiting()
	case "leases":
		return q.leases()
	case "deadlines":
		return q.deadlines()
	case "final":
		return q.final()
	case "unique":
		return q.unique()
	case "unique_ends":
		return q.uniqueEnds()
	case "queue_name":
		return q.name()
	case "in_s", "in_r", "in_c", "in_f", "in_x":
		return q.in(name[3:])
	case "settings":
		return q.settings()
	case "minutes":
		return q.minutes()
	case "reports":
		return q.reports()
	case "jids":
		return q.jids()
	}
	return ""
}

// all lists every key of the queue in the order the scripts take them
// (queueKeyNames). Script calls take the list from a keyLists, which
// builds it once per queue.
func (q queueKeys) all() []string {
	names := queueKeyNames()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = q.key(n)
	}
	return out
}

// named is the store-wide key a script names KEY_<name> ("" for another
// name).
func (k keys) named(name string) string {
	switch name {
	case "meta":
		return k.meta()
	case "queues":
		return k.queues()
	case "queue_names":
		return k.queueNames()
	case "workers":
		return k.workers()
	case "worker_ends":
		return k.workerEnds()
	case "worker_cmds":
		return k.workerCmds()
	case "jids":
		return k.jids()
	case "homes":
		return k.homes()
	}
	return ""
}

// escapeGlob escapes the characters that are special in a Redis pattern.
func escapeGlob(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\', c)
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// keyListsCap bounds how many queues' key lists a keyLists keeps; the
// lists of further queues are built at each call.
const keyListsCap = 4096

// keyLists keeps each queue's lists of keys, which every script call of
// the queue passes: building them anew is twenty strings per call. The
// lists are shared: callers must not change them. The zero value is ready
// to use.
type keyLists struct {
	mu    sync.RWMutex
	byNum map[uint32]keyList
}

// keyList is the keys of one queue: all of them (queueKeys.all), and the
// ones the enqueue script takes (its slots), without and with the JID
// index, the few its lean variant takes, and those of the lean variant
// with a claim behind it.
type keyList struct {
	all, enqueue, enqueueJID, enqueueLean, enqueueClaim []string
}

// of returns the key lists of queue num; enqueueSlots, jidSlots,
// leanSlots and claimSlots are the slots of the enqueue script and of its
// variants with JIDs, for plain pending jobs, and for those with a claim.
func (l *keyLists) of(k keys, num uint32, enqueueSlots, jidSlots, leanSlots, claimSlots []int) keyList {
	l.mu.RLock()
	kl, ok := l.byNum[num]
	l.mu.RUnlock()
	if ok {
		return kl
	}
	all := k.queue(num).all()
	kl = keyList{all: all, enqueue: slotKeys(all, enqueueSlots), enqueueJID: slotKeys(all, jidSlots), enqueueLean: slotKeys(all, leanSlots),
		enqueueClaim: slotKeys(all, claimSlots)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byNum == nil {
		l.byNum = map[uint32]keyList{}
	}
	if len(l.byNum) < keyListsCap {
		l.byNum[num] = kl
	}
	return kl
}
