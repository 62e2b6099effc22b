package redis

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// A job's record is one string in its queue's jobs hash:
//
//	header "\n" unique-key body
//
// The header is what the scripts read and rewrite: fields joined by "|",
// in the order of the h* constants below (1-based, as Lua counts), with
// times in Unix milliseconds and "" for an unset time. The worker id is
// hex-encoded so it can hold any byte. The unique key follows the header
// raw (its length is in the header); the body is written once by Enqueue,
// in the binary form of appendBody, and read by a script only where
// common.lua says so (the type, the payload's length, UniqueFor, the
// created time, the jid).
//
// Attempt errors and results live in their own hashes (keys.go), so the
// record of a pending job stays small.
//
// A store of format 3 (formatVersion) writes the header of a new pending
// job whose fields are defaults in its short form: "p", the max attempts
// in decimal, "\n" (see shortHeaderFits). It stands for the header
// "p|0|<max>|0|0||||||||0|". When the max attempts are bareMaxAttempts it
// leaves the header out altogether: the record is its body alone, and
// starts with the body's version byte (1 to bodyLastVersion), where a
// header starts with a letter (isBare). A run-at of "" (in any
// form) is the job's CreatedAt, read from the body: the claim of such a
// job keeps it "" in the active record it writes. All forms are read in
// stores of either format; a format-2 store never holds a short header,
// a bare record, an empty run-at or a compact body (bodyCompact), so a
// kyu that reads format 2 only never meets one.
const (
	hState       = 1  // one letter, see stateCode
	hAttempt     = 2  // attempts made
	hMaxAttempts = 3  //
	hToken       = 4  // lease token of the latest claim
	hPriority    = 5  //
	hRunAt       = 6  // ms
	hDeadline    = 7  // ms or ""
	hLeaseExp    = 8  // ms or "" while not active
	hStarted     = 9  // ms or ""
	hFinished    = 10 // ms or ""
	hWorker      = 11 // hex or ""
	hCancel      = 12 // see "The cancel field" below
	hUniqueLen   = 13 // bytes of unique key after the header
	hRetention   = 14 // "" default, "n" none, "f" forever, else ms to keep
	headerFields = 14
)

// The cancel field of a header: "" none; "d" cancelled by its deadline;
// "r" cancelled at once by Cancel; "q" active, its cancel requested; "R"
// cancelled after a requested cancel (reason requested, CancelRequested
// kept as a record); "h" cancelled by its handler (FailItem.Cancel).

// stateCode is the letter a record stores for a state.
func stateCode(s backend.State) string {
	switch s {
	case backend.StateScheduled:
		return "s"
	case backend.StatePending:
		return "p"
	case backend.StateActive:
		return "a"
	case backend.StateRetry:
		return "r"
	case backend.StateCompleted:
		return "c"
	case backend.StateFailed:
		return "f"
	case backend.StateCancelled:
		return "x"
	}
	return "?"
}

// stateOfCode is the inverse of stateCode.
func stateOfCode(code string) (backend.State, bool) {
	for _, s := range backend.States() {
		if stateCode(s) == code {
			return s, true
		}
	}
	return "", false
}

// bodyVersion is the first byte of the body of a job without a JID;
// bodyVersionJID that of one with a JID, whose body is the same fields
// followed by the JID and its length in two bytes, big-endian (MaxJID <
// 65536), so a script finds the JID from the record's end (jobJID in
// lua/common.lua) and a job without one is stored as before.
//
// A store of format 3 writes the compact body instead (version
// bodyCompact, or bodyCompactJID with the JID trailer): the type and the
// payload as in the others, then a byte of flags (the body* bits) saying
// which of the other fields follow, in the same order; one that does not
// is its default (no title, backend.DefaultTimeout, no UniqueFor,
// RetainDefault, CreatedAt at the id's time, no tags, no metadata).
//
// A compact body whose fields after the payload are all defaults but for
// a CreatedAt of 0 to maxFoldedCreated ms before the id's time (a job
// enqueued in a batch, whose id is made a little after the call's Now)
// has no flags byte and no created field: its version is
// bodyCompactDefaults plus twice those ms (plus one with the JID
// trailer), up to bodyLastVersion. A pending job with its options left
// alone so takes 1 byte besides its type and payload, where the others
// take 12 or more. Format 3 wrote such jobs with versions 3 and 4 before
// it had these, and those are read as ever. Every version with a JID
// trailer is even.
const (
	bodyVersion         = 1
	bodyVersionJID      = 2
	bodyCompact         = 3
	bodyCompactJID      = 4
	bodyCompactDefaults = 5
	maxFoldedCreated    = 29
	bodyLastVersion     = bodyCompactDefaults + 2*maxFoldedCreated + 1 // 64, below every header's first letter
)

// bareMaxAttempts is the max attempts a bare record (a pending job's
// record with no header, see above) stands for: the default one
// (backend.DefaultMaxAttempts) when bare records came in. It is part of
// the format, fixed here: a new default would leave records written
// before it meaning 25.
const bareMaxAttempts = 25

// The flags of a compact body: which fields follow.
const (
	bodyTitle = 1 << iota
	bodyTimeout
	bodyUniqueFor
	bodyRetention
	bodyCreated
	bodyTags
	bodyMetadata
)

// msOf is t in Unix milliseconds, "" for the zero time.
func msOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// retentionField is the header's retention: how many ms to keep a final job.
func retentionField(r backend.Retention) string {
	switch {
	case r == backend.RetainDefault:
		return ""
	case r == backend.RetainNone:
		return "n"
	case r == backend.RetainForever:
		return "f"
	}
	ms := (time.Duration(r) + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(int64(ms), 10)
}

// recordSize is a bound on the length of j's record, short of rare
// varints (a job's times and numbers take up to 128 bytes).
func recordSize(j *backend.Job) int {
	n := 128 + 2*len(j.WorkerID) + len(j.UniqueKey) + len(j.Type) + len(j.Payload) + len(j.Title) + len(j.JID)
	for _, t := range j.Tags {
		n += 2 + len(t)
	}
	for k, v := range j.Metadata {
		n += 4 + len(k) + len(v)
	}
	return n
}

// encodeRecord writes the record of a new job, its header in the long
// form.
func encodeRecord(j *backend.Job) string {
	return string(appendRecord(make([]byte, 0, recordSize(j)), j, false))
}

// appendRecord appends the record of a new job to b. With f3 set it is
// in format 3's forms: its header short when the job's fields allow it,
// its body compact.
func appendRecord(b []byte, j *backend.Job, f3 bool) []byte {
	return appendRecordCancel(b, j, "", f3)
}

// shortHeaderFits reports whether j's header, with the cancel field
// cancel, can be written in the short form: a pending job never claimed,
// of priority 0, due at its creation (to the millisecond), with no
// deadline, lease, worker, cancel, unique key or retention of its own,
// and an id whose time the body's CreatedAt is counted from.
func shortHeaderFits(j *backend.Job, cancel string) bool {
	return j.State == backend.StatePending && j.Attempt == 0 && j.LeaseToken == 0 && j.Priority == 0 &&
		j.MaxAttempts >= 0 && !j.RunAt.IsZero() && j.RunAt.UnixMilli() == j.CreatedAt.UnixMilli() &&
		j.Deadline.IsZero() && j.LeaseExpiresAt.IsZero() && j.StartedAt.IsZero() && j.FinishedAt.IsZero() &&
		j.WorkerID == "" && cancel == "" && j.UniqueKey == "" && j.Retention == backend.RetainDefault &&
		idMilli(j.ID) != 0
}

// appendRecordCancel is appendRecord with the header's cancel field (see
// "The cancel field" above), for a job that comes with its history.
func appendRecordCancel(b []byte, j *backend.Job, cancel string, f3 bool) []byte {
	if f3 && shortHeaderFits(j, cancel) {
		if j.MaxAttempts != bareMaxAttempts {
			b = append(b, 'p')
			b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
			b = append(b, '\n')
		}
		return appendBody(b, j, true)
	}
	b = append(b, stateCode(j.State)...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, j.LeaseToken, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	for _, t := range [...]time.Time{j.RunAt, j.Deadline, j.LeaseExpiresAt, j.StartedAt, j.FinishedAt} {
		b = append(b, '|')
		if !t.IsZero() {
			b = strconv.AppendInt(b, t.UnixMilli(), 10)
		}
	}
	b = append(b, '|')
	for i := 0; i < len(j.WorkerID); i++ {
		b = append(b, hexDigits[j.WorkerID[i]>>4], hexDigits[j.WorkerID[i]&15])
	}
	b = append(b, '|')
	b = append(b, cancel...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(len(j.UniqueKey)), 10)
	b = append(b, '|')
	b = append(b, retentionField(j.Retention)...)
	b = append(b, '\n')
	b = append(b, j.UniqueKey...)
	return appendBody(b, j, f3)
}

// hexDigits are the digits of a header's hex-encoded worker id.
const hexDigits = "0123456789abcdef"

// appendStr writes s with its length before it.
func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBody writes the fields a script seldom reads (see bodyVersion),
// in the compact form when compact is set.
func appendBody(b []byte, j *backend.Job, compact bool) []byte {
	// CreatedAt as ms before the time in the id (a UUIDv7 made at
	// enqueue): a byte or two unless the caller's clock is far off.
	created := idMilli(j.ID) - j.CreatedAt.UnixMilli()
	flags := ^byte(0)
	version := byte(bodyVersion)
	if compact {
		flags = 0
		for _, f := range [...]struct {
			bit byte
			set bool
		}{
			{bodyTitle, j.Title != ""}, {bodyTimeout, j.Timeout != backend.DefaultTimeout}, {bodyUniqueFor, j.UniqueFor != 0},
			{bodyRetention, j.Retention != backend.RetainDefault}, {bodyCreated, created != 0}, {bodyTags, len(j.Tags) > 0},
			{bodyMetadata, len(j.Metadata) > 0},
		} {
			if f.set {
				flags |= f.bit
			}
		}
		version = bodyCompact
		if flags&^bodyCreated == 0 && created >= 0 && created <= maxFoldedCreated {
			version, flags = bodyCompactDefaults+2*byte(created), 0
		}
	}
	if j.JID != "" {
		version++ // even: with the JID trailer
	}
	b = append(b, version)
	b = appendStr(b, j.Type)
	b = binary.AppendUvarint(b, uint64(len(j.Payload)))
	b = append(b, j.Payload...)
	if version == bodyCompact || version == bodyCompactJID {
		b = append(b, flags)
	}
	if flags&bodyTitle != 0 {
		b = appendStr(b, j.Title)
	}
	if flags&bodyTimeout != 0 {
		b = appendDuration(b, j.Timeout)
	}
	if flags&bodyUniqueFor != 0 {
		b = appendDuration(b, j.UniqueFor)
	}
	if flags&bodyRetention != 0 {
		b = appendDuration(b, time.Duration(j.Retention))
	}
	if flags&bodyCreated != 0 {
		b = binary.AppendVarint(b, created)
	}
	if flags&bodyTags != 0 {
		b = binary.AppendUvarint(b, uint64(len(j.Tags)))
		for _, t := range j.Tags {
			b = appendStr(b, t)
		}
	}
	if flags&bodyMetadata != 0 {
		b = binary.AppendUvarint(b, uint64(len(j.Metadata)))
		if len(j.Metadata) > 0 {
			for _, k := range slices.Sorted(maps.Keys(j.Metadata)) {
				b = appendStr(b, k)
				b = appendStr(b, j.Metadata[k])
			}
		}
	}
	if j.JID != "" {
		b = append(b, j.JID...)
		b = append(b, byte(len(j.JID)>>8), byte(len(j.JID)))
	}
	return b
}

// appendDuration writes d compactly: whole milliseconds as ms<<1, any
// other duration as ns<<1|1 (zigzag varints, so negatives fit).
func appendDuration(b []byte, d time.Duration) []byte {
	if d%time.Millisecond == 0 {
		return binary.AppendVarint(b, int64(d/time.Millisecond)<<1)
	}
	return binary.AppendVarint(b, int64(d)<<1|1)
}

// decodeDuration reads what appendDuration wrote.
func decodeDuration(v int64) time.Duration {
	if v&1 == 0 {
		return time.Duration(v>>1) * time.Millisecond
	}
	return time.Duration(v >> 1)
}

// decodeRecord reads a stored record back into a Job. Anything that does
// not parse is reported as ErrCorrupt, naming the job and the field.
func decodeRecord(id, queue, rec string) (*backend.Job, error) {
	j := new(backend.Job)
	if err := decodeRecordTo(j, id, queue, rec, nil); err != nil {
		return nil, err
	}
	return j, nil
}

// recordShare is what the records of one reply share when they are
// decoded together (a claim's): the worker id that leased them, so each
// job takes that string instead of decoding a copy of its own, and room
// for their payloads, so the copies take one allocation.
type recordShare struct {
	workerHex, workerID string // the worker id as records hold it, and as it is
	payloads            []byte // the payload copies made, within its capacity
	// rest is the length of the records still to decode, this one's
	// included: it bounds their payloads, and sizes the room when the
	// first payload comes (records without one take none).
	rest int
}

// payload copies p into the room of sh (or its own allocation, with sh
// nil). The copy's capacity ends with it, so growing one job's payload
// never writes over the next one's.
func (sh *recordShare) payload(p string) []byte {
	if sh == nil {
		return []byte(p)
	}
	if cap(sh.payloads)-len(sh.payloads) < len(p) {
		sh.payloads = make([]byte, 0, max(sh.rest, len(p)))
	}
	n := len(sh.payloads)
	sh.payloads = append(sh.payloads, p...)
	return sh.payloads[n:len(sh.payloads):len(sh.payloads)]
}

// decodeRecordTo is decodeRecord into *j. The job's strings (type, title,
// unique key, tags) share rec's memory; its payload is a copy. sh, when
// set, is what the records decoded with this one share.
func decodeRecordTo(j *backend.Job, id, queue, rec string, sh *recordShare) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: job %s: %s", ErrCorrupt, id, what)
	}
	var h [headerFields]string
	rest, ok := splitRecord(rec, &h)
	if !ok {
		head, _, ok := strings.Cut(rec, "\n")
		switch {
		case !ok:
			return bad("no header")
		case isShortHeader(head):
			return bad("short header is not p and a number")
		}
		return bad(fmt.Sprintf("header has %d fields, want %d", strings.Count(head, "|")+1, headerFields))
	}
	*j = backend.Job{ID: id, Queue: queue}
	var err error
	state, ok := stateOfCode(h[hState-1])
	if !ok {
		return bad(fmt.Sprintf("unknown state %q", h[hState-1]))
	}
	j.State = state
	ints := [...]struct {
		field int
		name  string
		dst   *int
	}{{hAttempt, "attempt", &j.Attempt}, {hMaxAttempts, "max_attempts", &j.MaxAttempts}, {hPriority, "priority", &j.Priority}}
	for _, f := range ints {
		if *f.dst, err = strconv.Atoi(h[f.field-1]); err != nil {
			return bad(f.name + " is not a number")
		}
	}
	if j.LeaseToken, err = strconv.ParseInt(h[hToken-1], 10, 64); err != nil {
		return bad("lease token is not a number")
	}
	times := [...]struct {
		field int
		name  string
		dst   *time.Time
	}{
		{hRunAt, "run_at", &j.RunAt}, {hDeadline, "deadline", &j.Deadline}, {hLeaseExp, "lease_expires_at", &j.LeaseExpiresAt},
		{hStarted, "started_at", &j.StartedAt}, {hFinished, "finished_at", &j.FinishedAt},
	}
	for _, f := range times {
		if *f.dst, err = parseMs(h[f.field-1]); err != nil {
			return bad(f.name + " is not a time")
		}
	}
	if wh := h[hWorker-1]; sh != nil && wh != "" && wh == sh.workerHex {
		j.WorkerID = sh.workerID
	} else if wh != "" {
		w, err := hex.DecodeString(wh)
		if err != nil {
			return bad("worker id is not hex")
		}
		j.WorkerID = string(w)
	}
	switch h[hCancel-1] {
	case "":
	case "d":
		j.CancelReason = backend.CancelReasonDeadline
	case "r":
		j.CancelReason = backend.CancelReasonRequested
	case "q":
		j.CancelRequested = true
	case "R":
		j.CancelReason, j.CancelRequested = backend.CancelReasonRequested, true
	case "h":
		j.CancelReason = backend.CancelReasonHandler
	default:
		return bad("unknown cancel reason")
	}
	ulen, err := strconv.Atoi(h[hUniqueLen-1])
	if err != nil || ulen < 0 || ulen > len(rest) {
		return bad("unique key length out of range")
	}
	j.UniqueKey, rest = rest[:ulen], rest[ulen:]
	if err := decodeBody(j, rest, sh); err != nil {
		return bad(err.Error())
	}
	if j.RunAt.IsZero() {
		// Due at its creation (see the short header above).
		j.RunAt = j.CreatedAt
	}
	return nil
}

// isBare reports whether rec is a bare record: a pending job's body with
// no header before it (see bareMaxAttempts), which starts with the
// body's version byte where a header starts with a letter.
func isBare(rec string) bool {
	return len(rec) > 0 && rec[0] >= bodyVersion && rec[0] <= bodyLastVersion
}

// splitRecord reads the header of a record of any form into its fields
// and returns what follows it (the unique key and the body); ok is false
// when it has no header of any form.
func splitRecord(rec string, h *[headerFields]string) (tail string, ok bool) {
	if isBare(rec) {
		*h = [headerFields]string{hState - 1: "p", hAttempt - 1: "0", hMaxAttempts - 1: strconv.Itoa(bareMaxAttempts),
			hToken - 1: "0", hPriority - 1: "0", hUniqueLen - 1: "0"}
		return rec, true
	}
	head, tail, ok := strings.Cut(rec, "\n")
	if !ok || !splitHeader(head, h) {
		return "", false
	}
	return tail, true
}

// isShortHeader reports whether head (without its newline) is not of the
// long form, whose second byte is the "|" after the state letter.
func isShortHeader(head string) bool {
	return len(head) < 2 || head[1] != '|'
}

// splitHeader reads a header (without its newline) of either form into
// its fields; ok is false when it is of neither.
func splitHeader(head string, h *[headerFields]string) (ok bool) {
	if isShortHeader(head) {
		if len(head) < 2 || head[0] != 'p' {
			return false
		}
		for i := 1; i < len(head); i++ {
			if head[i] < '0' || head[i] > '9' {
				return false
			}
		}
		*h = [headerFields]string{hState - 1: "p", hAttempt - 1: "0", hMaxAttempts - 1: head[1:], hToken - 1: "0", hPriority - 1: "0", hUniqueLen - 1: "0"}
		return true
	}
	n, tail := 0, head
	for ; n < headerFields-1; n++ {
		i := strings.IndexByte(tail, '|')
		if i < 0 {
			break
		}
		h[n], tail = tail[:i], tail[i+1:]
	}
	if n != headerFields-1 || strings.IndexByte(tail, '|') >= 0 {
		return false
	}
	h[n] = tail
	return true
}

// parseMs reads a header time; "" is the zero time.
func parseMs(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// bodyReader reads a body's fields in turn; fail is set once one does not
// parse, and every later read returns zero.
type bodyReader struct {
	b    string
	fail bool
}

func (r *bodyReader) uvarint() uint64 {
	if r.fail {
		return 0
	}
	var v uint64
	for i := 0; i < len(r.b) && i < binary.MaxVarintLen64; i++ {
		c := r.b[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			break // overflows 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return v
		}
	}
	r.fail = true
	return 0
}

// uvarintIf is uvarint when present is set, else 0 (a field a compact
// body leaves out).
func (r *bodyReader) uvarintIf(present bool) uint64 {
	if !present {
		return 0
	}
	return r.uvarint()
}

func (r *bodyReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// str reads a string with its length before it; it shares the body's memory.
func (r *bodyReader) str() string {
	n := r.uvarint()
	if r.fail || n > uint64(len(r.b)) {
		r.fail = true
		return ""
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// decodeBody reads what appendBody wrote.
func decodeBody(j *backend.Job, body string, sh *recordShare) error {
	if len(body) == 0 || body[0] < bodyVersion || body[0] > bodyLastVersion {
		return fmt.Errorf("body has an unknown version")
	}
	if body[0]%2 == 0 { // with the JID trailer
		if len(body) < 3 {
			return fmt.Errorf("body is truncated")
		}
		n := int(body[len(body)-2])<<8 | int(body[len(body)-1])
		if n == 0 || n > len(body)-3 {
			return fmt.Errorf("jid length out of range")
		}
		j.JID = body[len(body)-2-n : len(body)-2]
		body = body[:len(body)-2-n]
	}
	r := bodyReader{b: body[1:]}
	j.Type = r.str()
	if p := r.str(); p != "" {
		j.Payload = sh.payload(p)
	}
	flags := ^byte(0)
	var created int64 // ms before the id's time
	if body[0] >= bodyCompactDefaults {
		flags, created = 0, int64(body[0]-bodyCompactDefaults)/2
		j.Timeout = backend.DefaultTimeout
	} else if body[0] >= bodyCompact {
		if len(r.b) == 0 {
			return fmt.Errorf("body is truncated")
		}
		flags, r.b = r.b[0], r.b[1:]
		if flags >= bodyMetadata<<1 {
			return fmt.Errorf("body has unknown flags")
		}
		j.Timeout = backend.DefaultTimeout
	}
	if flags&bodyTitle != 0 {
		j.Title = r.str()
	}
	if flags&bodyTimeout != 0 {
		j.Timeout = decodeDuration(r.varint())
	}
	if flags&bodyUniqueFor != 0 {
		j.UniqueFor = decodeDuration(r.varint())
	}
	if flags&bodyRetention != 0 {
		j.Retention = backend.Retention(decodeDuration(r.varint()))
	}
	if flags&bodyCreated != 0 {
		created = r.varint()
	}
	j.CreatedAt = time.UnixMilli(idMilli(j.ID) - created).UTC()
	if n := r.uvarintIf(flags&bodyTags != 0); !r.fail && n > 0 {
		if n > uint64(len(r.b)) {
			return fmt.Errorf("body is truncated")
		}
		j.Tags = make([]string, 0, n)
		for range n {
			j.Tags = append(j.Tags, r.str())
		}
	}
	if n := r.uvarintIf(flags&bodyMetadata != 0); !r.fail && n > 0 {
		if n > uint64(len(r.b)) {
			return fmt.Errorf("body is truncated")
		}
		j.Metadata = make(map[string]string, n)
		for range n {
			k := r.str()
			j.Metadata[k] = r.str()
		}
	}
	if r.fail {
		return fmt.Errorf("body is truncated")
	}
	if len(r.b) != 0 {
		return fmt.Errorf("body has %d bytes too many", len(r.b))
	}
	return nil
}

// storedError is one attempt error as the scripts write it.
type storedError struct {
	Attempt int    `json:"a"`
	At      int64  `json:"t"`
	Kind    string `json:"k"`
	Message string `json:"m"`
	Stack   string `json:"s"`
}

// decodeErrors reads a job's errors hash value ("" for none).
func decodeErrors(id, s string) ([]backend.AttemptError, error) {
	if s == "" {
		return nil, nil
	}
	var st []storedError
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("%w: job %s: errors: %v", ErrCorrupt, id, err)
	}
	out := make([]backend.AttemptError, len(st))
	for i, e := range st {
		out[i] = backend.AttemptError{Attempt: e.Attempt, At: time.UnixMilli(e.At).UTC(), Kind: e.Kind, Message: e.Message, Stack: e.Stack}
	}
	return out, nil
}

// storedProgress is a job's progress as Report writes it.
type storedProgress struct {
	Percent float64 `json:"p"`
	Message string  `json:"m,omitempty"`
	At      int64   `json:"t"`
}

// storedLine is one log line as Report writes it.
type storedLine struct {
	At   int64  `json:"t"`
	Line string `json:"l"`
}

// encodeProgress writes a progress report made at now.
func encodeProgress(p *backend.Progress, now time.Time) string {
	b, _ := json.Marshal(storedProgress{Percent: p.Percent, Message: p.Message, At: now.UnixMilli()})
	return string(b)
}

// encodeLine writes a log line made at now.
func encodeLine(line string, now time.Time) string {
	b, _ := json.Marshal(storedLine{At: now.UnixMilli(), Line: line})
	return string(b)
}

// jobExtras are the stored values beside a record that a view carries
// (see view in lua/common.lua); nil for a value not stored.
type jobExtras struct {
	errors, result, progress, logs, logCounts, expires *string
}

// apply decodes the extras into j.
func (x jobExtras) apply(j *backend.Job) error {
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: job %s: %s: %v", ErrCorrupt, j.ID, what, err)
	}
	if x.errors != nil {
		errs, err := decodeErrors(j.ID, *x.errors)
		if err != nil {
			return err
		}
		j.Errors = errs
	}
	if x.result != nil {
		j.Result = []byte(*x.result)
	}
	if x.progress != nil {
		var p storedProgress
		if err := json.Unmarshal([]byte(*x.progress), &p); err != nil {
			return bad("progress", err)
		}
		j.Progress = &backend.Progress{Percent: p.Percent, Message: p.Message, At: time.UnixMilli(p.At).UTC()}
	}
	if x.logs != nil {
		var lines []storedLine
		if err := json.Unmarshal([]byte(*x.logs), &lines); err != nil {
			return bad("logs", err)
		}
		j.Logs = make([]backend.LogLine, len(lines))
		for i, l := range lines {
			j.Logs[i] = backend.LogLine{At: time.UnixMilli(l.At).UTC(), Line: l.Line}
		}
	}
	if x.logCounts != nil {
		_, dropped, ok := strings.Cut(*x.logCounts, "|")
		n, err := strconv.Atoi(dropped)
		if !ok || err != nil || n < 0 {
			return bad("log counts", fmt.Errorf("%q is not kept|dropped", *x.logCounts))
		}
		j.LogsDropped = n
	}
	if x.expires != nil {
		ms, err := strconv.ParseFloat(*x.expires, 64)
		if err != nil {
			return bad("expiry", err)
		}
		j.ExpiresAt = time.UnixMilli(int64(ms)).UTC()
	}
	return nil
}
