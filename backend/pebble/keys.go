package pebble

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Key layout inside Pebble. Every key starts with a one-byte prefix naming
// what it holds:
//
//	'j' + id[16]              the job's metadata record (encoding.go)
//	'x' + id[16]              the job's payload, written once at enqueue
//	                          (under 'p' + id[16] before format 4: see
//	                          movePayloads)
//	'u' + queue + 0x00 + key  a held unique key (uniqueValue)
//	'i' + jid                 the id[16] of the job holding a JID (jids.go)
//	'l' + id[16] + n[4]       log line n of the job (encodeLogLine), n from 0
//	'q' + queue               the queue's settings (encodeSettings)
//	'm' + minute[8]           the counters of one minute (Unix seconds, big-endian)
//	't'                       the counters' totals
//	'n' + minute[8] + queue   the counters of one queue in one minute
//	'w' + worker id           a worker's registry entry (encodeWorker)
//	'c'                       the number of groups committed (uvarint;
//	                          see Options.AcceptDataLoss)
//	'r' + at[8] + tag[8]      the ids[16]... of final jobs retention
//	                          deletes at the time code at (retention.go)
//	'e'                       the 'r' keys are complete (empty value)
//
// The keys from 'l' on are new in format 2; the 'i' keys in format 3; the
// 'r' and 'e' keys in format 5.
//
// The payloads' prefix sorts after every other. The tables Pebble flushes
// from its memtable hold mostly rewritten records (every claim and outcome
// rewrites one) and do not span the payloads, so its compactions merge the
// records without reading and rewriting the payloads as well, which never
// change.
const (
	prefixJob      = 'j'
	prefixPayload  = 'x'
	prefixUnique   = 'u'
	prefixJID      = 'i'
	prefixLog      = 'l'
	prefixSettings = 'q'
	prefixMinute   = 'm'
	prefixTotals   = 't'
	prefixQueueMin = 'n'
	prefixWorker   = 'w'
	prefixCommits  = 'c'
	// prefixRetention and prefixRetentionBuilt are the retention index
	// (retention.go).
	prefixRetention      = 'r'
	prefixRetentionBuilt = 'e'
)

// prefixPayloadV3 is where format 3 and earlier kept payloads.
const prefixPayloadV3 = 'p'

// jobID is a job id in its compact binary form (a UUID).
type jobID [16]byte

// String gives the canonical textual form used in the contract.
func (id jobID) String() string { return uuid.UUID(id).String() }

// parseID reads a canonical UUID string; ok is false for anything else.
func parseID(s string) (jobID, bool) {
	if len(s) != 36 {
		return jobID{}, false
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return jobID{}, false
	}
	return jobID(u), true
}

func jobKey(id jobID) []byte {
	k := make([]byte, 17)
	k[0] = prefixJob
	copy(k[1:], id[:])
	return k
}

func payloadKey(id jobID) []byte {
	k := make([]byte, 17)
	k[0] = prefixPayload
	copy(k[1:], id[:])
	return k
}

// uniqueName is the in-memory and on-disk name of a unique key: queue names
// cannot hold a zero byte, so queue + 0x00 + key is unambiguous.
func uniqueName(queue, key string) string {
	return queue + "\x00" + key
}

func uniqueKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, prefixUnique)
	return append(k, name...)
}

// logKey is the key of log line n of a job; the lines of one job sort in
// order under logPrefix(id).
func logKey(id jobID, n int) []byte {
	k := make([]byte, 0, 21)
	k = append(k, prefixLog)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(n))
}

// logPrefix is the prefix of every log line key of a job.
func logPrefix(id jobID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, prefixLog)
	return append(k, id[:]...)
}

func settingsKey(queue string) []byte { return append([]byte{prefixSettings}, queue...) }

func minuteKey(unix int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixMinute}, uint64(unix))
}

func queueMinuteKey(qm queueMinute) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefixQueueMin}, uint64(qm.minute))
	return append(k, qm.queue...)
}

func workerKey(id string) []byte { return append([]byte{prefixWorker}, id...) }

func jidKey(jid string) []byte {
	k := make([]byte, 0, 1+len(jid))
	k = append(k, prefixJID)
	return append(k, jid...)
}
