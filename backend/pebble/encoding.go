package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// recordVersion is the first byte of every encoded job record. A record
// with another first byte is refused by decodeJob.
const recordVersion = 1

// errCorruptRecord is wrapped by every decoding error.
var errCorruptRecord = errors.New("kyu/pebble: corrupt job record")

// Flags in a record's flag word.
const (
	flagHasPayload = 1 << 0
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
	for c, k := range stateCodes {
		if c > 0 && k == s {
			return byte(c)
		}
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
func encodeJob(buf []byte, j *backend.Job, hasPayload bool) []byte {
	buf = append(buf, recordVersion)
	var flags uint64
	if hasPayload {
		flags |= flagHasPayload
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

// decodeJob parses a record written by encodeJob. It never panics: any
// malformed input gives an error wrapping errCorruptRecord. The returned
// job has no ID and no Payload; hasPayload says whether a payload key exists.
func decodeJob(b []byte) (j *backend.Job, hasPayload bool, err error) {
	if len(b) == 0 {
		return nil, false, fmt.Errorf("%w: empty", errCorruptRecord)
	}
	if b[0] != recordVersion {
		return nil, false, fmt.Errorf("%w: unknown encoding version %d (this kyu reads %d)", errCorruptRecord, b[0], recordVersion)
	}
	d := decoder{b: b[1:]}
	j = &backend.Job{}
	flags := d.uvarint()
	hasPayload = flags&flagHasPayload != 0
	j.Type = d.string()
	j.Queue = d.string()
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
	j.WorkerID = d.string()
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
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, false, d.err
	}
	return j, hasPayload, nil
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
	b   []byte
	err error
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
	buf = append(buf, recordVersion)
	buf = append(buf, u.holder[:]...)
	buf = binary.AppendVarint(buf, u.until)
	return append(buf, stateCode(u.state))
}

func decodeUnique(b []byte) (uniqueValue, error) {
	var u uniqueValue
	if len(b) < 17 || b[0] != recordVersion {
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
