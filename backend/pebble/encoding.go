package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// recordVersion is the first byte of every job record this code writes.
// decodeJob also reads records of version 2 (written before format 3):
// they lack the JID, and of version 1 (written before format 2): they lack
// the fields of the version 2 tail too, and a final job's ExpiresAt is
// derived from its FinishedAt and retention as version 1 code did.
// Unique key values keep version 1 (uniqueVersion).
const (
	recordVersion   = 3
	recordVersionV2 = 2
	recordVersionV1 = 1
	uniqueVersion   = 1
)

// errCorruptRecord is wrapped by every decoding error.
var errCorruptRecord = errors.New("kyu/pebble: corrupt job record")

// Flags in a record's flag word.
const (
	flagHasPayload      = 1 << 0
	flagCancelRequested = 1 << 1
	// flagsKnown are the flags this code reads; a record with others is
	// refused, so a later flag cannot be silently dropped.
	flagsKnown = flagHasPayload | flagCancelRequested
)

// stateCodes are the states' one-byte codes on disk. They are fixed: a
// code is never reused or renumbered, and zero is never a valid state.
var stateCodes = [...]backend.State{
	1: backend.StateScheduled,
	2: backend.StatePending,
	3: backend.StateActive,
	4: backend.StateRetry,
	5: backend.StateCompleted,
	6: backend.StateFailed,
	7: backend.StateCancelled,
}

// stateCode is the on-disk code of s; 0 for an unknown state.
func stateCode(s backend.State) byte {
	switch s {
	case backend.StateScheduled:
		return 1
	case backend.StatePending:
		return 2
	case backend.StateActive:
		return 3
	case backend.StateRetry:
		return 4
	case backend.StateCompleted:
		return 5
	case backend.StateFailed:
		return 6
	case backend.StateCancelled:
		return 7
	}
	return 0
}

// stateFromCode reads an on-disk state code.
func stateFromCode(c byte) (backend.State, bool) {
	if c == 0 || int(c) >= len(stateCodes) {
		return "", false
	}
	return stateCodes[c], true
}

// encodeJob appends the binary form of j (without ID and Payload) to buf.
//
// Layout (version 1), in order: version byte; flags uvarint; type, queue,
// title strings; priority varint; state byte; attempt, max attempts varint;
// run-at time; timeout varint; deadline time; unique key string; unique-for
// varint; tags (uvarint count+1, 0 = nil, then strings); metadata (count+1
// then key/value strings, sorted by key); retention varint; created,
// started, finished times; worker id string; lease token varint; lease
// expiry time; errors (count, then attempt varint, at time, kind, message,
// stack strings); result (uvarint length+1, 0 = nil, then bytes); cancel
// reason string. Strings are uvarint length then bytes; times are described
// at appendTime.
//
// Version 2 adds, after the cancel reason: expires-at time; progress (0 =
// nil, or 1 then percent as 8 bytes of IEEE 754 bits big-endian, message
// string, at time); logs dropped varint; log lines held varint (the
// lines themselves live under their own keys, see logKey). The flag
// flagCancelRequested is new in version 2 too.
//
// Version 3 adds, after the log lines held: the JID string.
func encodeJob(buf []byte, j *backend.Job, sd side) []byte {
	buf = append(buf, recordVersion)
	buf = appendJobV2(buf, j, sd)
	return appendString(buf, j.JID)
}

// appendJobV2 appends the fields of version 2 (everything after the
// version byte up to the log lines held).
func appendJobV2(buf []byte, j *backend.Job, sd side) []byte {
	buf = appendJobV1(buf, j, sd)
	buf = appendTime(buf, j.ExpiresAt)
	if pr := j.Progress; pr == nil {
		buf = append(buf, 0)
	} else {
		buf = append(buf, 1)
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(pr.Percent))
		buf = appendString(buf, pr.Message)
		buf = appendTime(buf, pr.At)
	}
	buf = binary.AppendVarint(buf, int64(j.LogsDropped))
	return binary.AppendVarint(buf, int64(sd.logs))
}

// appendJobV1 appends the fields shared by every version (everything
// after the version byte up to the cancel reason).
func appendJobV1(buf []byte, j *backend.Job, sd side) []byte {
	var flags uint64
	if sd.payload {
		flags |= flagHasPayload
	}
	if j.CancelRequested {
		flags |= flagCancelRequested
	}
	buf = binary.AppendUvarint(buf, flags)
	buf = appendString(buf, j.Type)
	buf = appendString(buf, j.Queue)
	buf = appendString(buf, j.Title)
	buf = binary.AppendVarint(buf, int64(j.Priority))
	buf = append(buf, stateCode(j.State))
	buf = binary.AppendVarint(buf, int64(j.Attempt))
	buf = binary.AppendVarint(buf, int64(j.MaxAttempts))
	buf = appendTime(buf, j.RunAt)
	buf = binary.AppendVarint(buf, int64(j.Timeout))
	buf = appendTime(buf, j.Deadline)
	buf = appendString(buf, j.UniqueKey)
	buf = binary.AppendVarint(buf, int64(j.UniqueFor))
	if j.Tags == nil {
		buf = append(buf, 0)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(j.Tags))+1)
		for _, t := range j.Tags {
			buf = appendString(buf, t)
		}
	}
	if j.Metadata == nil {
		buf = append(buf, 0)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(j.Metadata))+1)
		keys := make([]string, 0, len(j.Metadata))
		for k := range j.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			buf = appendString(buf, k)
			buf = appendString(buf, j.Metadata[k])
		}
	}
	buf = binary.AppendVarint(buf, int64(j.Retention))
	buf = appendTime(buf, j.CreatedAt)
	buf = appendTime(buf, j.StartedAt)
	buf = appendTime(buf, j.FinishedAt)
	buf = appendString(buf, j.WorkerID)
	buf = binary.AppendVarint(buf, j.LeaseToken)
	buf = appendTime(buf, j.LeaseExpiresAt)
	buf = binary.AppendUvarint(buf, uint64(len(j.Errors)))
	for _, e := range j.Errors {
		buf = binary.AppendVarint(buf, int64(e.Attempt))
		buf = appendTime(buf, e.At)
		buf = appendString(buf, e.Kind)
		buf = appendString(buf, e.Message)
		buf = appendString(buf, e.Stack)
	}
	if j.Result == nil {
		buf = append(buf, 0)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(j.Result))+1)
		buf = append(buf, j.Result...)
	}
	buf = appendString(buf, j.CancelReason)
	return buf
}

// decodeJob parses a record written by encodeJob, of version 1, 2 or 3. It
// never panics: any malformed input gives an error wrapping
// errCorruptRecord. The returned job has no ID, Payload or Logs; sd says
// which keys of its own the job has.
func decodeJob(b []byte) (j *backend.Job, sd side, err error) {
	return decodeJobNames(b, nil)
}

// decodeJobNames is decodeJob taking the type, queue and worker id from
// names (see nameCache), which may be nil.
func decodeJobNames(b []byte, names *nameCache) (j *backend.Job, sd side, err error) {
	j = &backend.Job{}
	if sd, err = decodeJobInto(j, b, names); err != nil {
		return nil, side{}, err
	}
	return j, sd, nil
}

// decodeJobInto is decodeJobNames decoding into j, which must be a zero
// Job; on error j holds a part of the record.
func decodeJobInto(j *backend.Job, b []byte, names *nameCache) (sd side, err error) {
	if len(b) == 0 {
		return side{}, fmt.Errorf("%w: empty", errCorruptRecord)
	}
	version := b[0]
	if version != recordVersion && version != recordVersionV2 && version != recordVersionV1 {
		return side{}, fmt.Errorf("%w: unknown encoding version %d (this kyu reads %d to %d)", errCorruptRecord, b[0], recordVersionV1, recordVersion)
	}
	d := decoder{b: b[1:], names: names}
	flags := d.uvarint()
	if d.err == nil && (flags&^flagsKnown != 0 || version == recordVersionV1 && flags&flagCancelRequested != 0) {
		d.fail("unknown flags %#x", flags)
	}
	sd.payload = flags&flagHasPayload != 0
	j.CancelRequested = flags&flagCancelRequested != 0
	j.Type = d.name()
	j.Queue = d.name()
	j.Title = d.string()
	j.Priority = d.int()
	code := d.byte()
	if d.err == nil {
		s, ok := stateFromCode(code)
		if !ok {
			d.fail("unknown state code %d", code)
		}
		j.State = s
	}
	j.Attempt = d.int()
	j.MaxAttempts = d.int()
	j.RunAt = d.time()
	j.Timeout = time.Duration(d.varint())
	j.Deadline = d.time()
	j.UniqueKey = d.string()
	j.UniqueFor = time.Duration(d.varint())
	if n := d.count(); n > 0 {
		j.Tags = make([]string, n-1)
		for i := range j.Tags {
			j.Tags[i] = d.string()
		}
	}
	if n := d.count(); n > 0 {
		j.Metadata = make(map[string]string, n-1)
		for i := 0; i < n-1 && d.err == nil; i++ {
			k := d.string()
			j.Metadata[k] = d.string()
		}
	}
	j.Retention = backend.Retention(d.varint())
	j.CreatedAt = d.time()
	j.StartedAt = d.time()
	j.FinishedAt = d.time()
	j.WorkerID = d.name()
	j.LeaseToken = d.varint()
	j.LeaseExpiresAt = d.time()
	if n := d.count(); n > 0 {
		j.Errors = make([]backend.AttemptError, n)
		for i := range j.Errors {
			e := &j.Errors[i]
			e.Attempt = d.int()
			e.At = d.time()
			e.Kind = d.string()
			e.Message = d.string()
			e.Stack = d.string()
		}
	}
	if n := d.count(); n > 0 {
		j.Result = d.bytes(n - 1)
	}
	j.CancelReason = d.string()
	if version >= recordVersionV2 {
		j.ExpiresAt = d.time()
		switch d.byte() {
		case 0:
		case 1:
			pr := &backend.Progress{}
			if bits := d.take(8); bits != nil {
				pr.Percent = math.Float64frombits(binary.BigEndian.Uint64(bits))
			}
			pr.Message = d.string()
			pr.At = d.time()
			if d.err == nil && !(pr.Percent >= 0 && pr.Percent <= 100) {
				d.fail("progress percent %v out of range", pr.Percent)
			}
			j.Progress = pr
		default:
			d.fail("bad progress marker")
		}
		j.LogsDropped = d.int()
		sd.logs = d.int()
		if d.err == nil && (j.LogsDropped < 0 || sd.logs < 0) {
			d.fail("negative log count")
		}
		if version >= recordVersion {
			j.JID = d.string()
		}
	} else if d.err == nil {
		j.ExpiresAt = expiresAtV1(j)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return side{}, d.err
	}
	return sd, nil
}

// expiresAtV1 is when version 1 code would have deleted a final job: its
// retention (or the default for its state) after FinishedAt, never when
// that is past the range of times.
func expiresAtV1(j *backend.Job) time.Time {
	if !j.State.Final() {
		return time.Time{}
	}
	keep, forever := j.Retention.Keep(j.State)
	if forever {
		return time.Time{}
	}
	at := j.FinishedAt.Add(keep)
	if !backend.InTimeRange(at) {
		return time.Time{}
	}
	return at
}

// Times are stored as a signed varint: 0 for the zero time, otherwise the
// Unix time in nanoseconds, plus one when it is not negative (so that the
// instant 1970-01-01T00:00:00Z stays distinct from the zero time).
func appendTime(buf []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(buf, 0)
	}
	return binary.AppendVarint(buf, timeCode(t))
}

func timeCode(t time.Time) int64 {
	n := t.UnixNano()
	if n >= 0 {
		n++
	}
	return n
}

func timeFromCode(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	if n > 0 {
		n--
	}
	return time.Unix(0, n).UTC()
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decoder reads the primitives of a record, remembering the first error;
// after an error every read returns a zero value.
type decoder struct {
	b     []byte
	err   error
	names *nameCache
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errCorruptRecord, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) > 0 && d.b[0] < 0x80 {
		// One byte, as most of a record's numbers and lengths are.
		v := uint64(d.b[0])
		d.b = d.b[1:]
		return v
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) > 0 && d.b[0] < 0x80 {
		// One byte (zig-zag, as binary.Varint reads it).
		u := d.b[0]
		d.b = d.b[1:]
		return int64(u>>1) ^ -int64(u&1)
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads an element count and checks it against the bytes left (every
// element takes at least one byte), so garbage cannot ask for a huge
// allocation.
func (d *decoder) count() int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b))+1 {
		d.fail("count %d exceeds the %d bytes left", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) string() string {
	n := d.uvarint()
	return string(d.take(n))
}

// name reads a string that many records share (a type, a queue, a
// worker id): from d.names when it has it.
func (d *decoder) name() string {
	if d.names == nil {
		return d.string()
	}
	return d.names.get(d.take(d.uvarint()))
}

func (d *decoder) bytes(n int) []byte {
	s := d.take(uint64(n))
	if d.err != nil {
		return nil
	}
	return append([]byte{}, s...)
}

func (d *decoder) time() time.Time {
	return timeFromCode(d.varint())
}

// uniqueValue is what a held unique key stores: the holder's id, when the
// hold ends (timeCode; 0 means "until the holder is final"), and the
// holder's state as last known (kept for holders that were deleted while
// their UniqueFor period still runs).
type uniqueValue struct {
	holder jobID
	until  int64
	state  backend.State
}

func encodeUnique(u uniqueValue) []byte {
	buf := make([]byte, 0, 1+16+10+1)
	buf = append(buf, uniqueVersion)
	buf = append(buf, u.holder[:]...)
	buf = binary.AppendVarint(buf, u.until)
	return append(buf, stateCode(u.state))
}

func decodeUnique(b []byte) (uniqueValue, error) {
	var u uniqueValue
	if len(b) < 17 || b[0] != uniqueVersion {
		return u, fmt.Errorf("%w: bad unique key value", errCorruptRecord)
	}
	copy(u.holder[:], b[1:17])
	d := decoder{b: b[17:]}
	u.until = d.varint()
	s, ok := stateFromCode(d.byte())
	if d.err != nil || !ok || len(d.b) != 0 {
		return u, fmt.Errorf("%w: bad unique key value", errCorruptRecord)
	}
	u.state = s
	return u, nil
}
