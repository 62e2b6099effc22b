package redis

import (
	"fmt"

	"github.com/google/uuid"
)

// maxQueues bounds the queue numbers a store hands out: a job id carries
// its queue's number in 24 bits.
const maxQueues = 1<<24 - 1

// newJobID returns a UUIDv7 (so ids sort by creation time, and within one
// process strictly in creation order) whose random bits 66 to 89 (bytes 9
// to 11) hold the number of the job's queue. The id alone then names the
// slot of the job's keys: Complete, Heartbeat, Get and the others need no
// lookup and no cross-slot hop. 38 random bits remain.
func newJobID(queueNum uint32) (string, error) {
	u, err := newJobUUID(queueNum)
	if err != nil {
		return "", err
	}
	return string(appendID(nil, u)), nil
}

// newJobUUID is newJobID's UUID, before its text form (appendID).
func newJobUUID(queueNum uint32) (uuid.UUID, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return u, fmt.Errorf("kyu/redis: new job id: %w", err)
	}
	u[9] = byte(queueNum >> 16)
	u[10] = byte(queueNum >> 8)
	u[11] = byte(queueNum)
	return u, nil
}

// appendID appends u's text form, as uuid.UUID.String writes it
// (8-4-4-4-12 lower-case hex digits).
func appendID(b []byte, u uuid.UUID) []byte {
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// queueNumOf reads the queue number from a job id; ok is false for a
// string that is not a UUID (which names no job).
func queueNumOf(id string) (num uint32, ok bool) {
	if len(id) != 36 {
		return 0, false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return 0, false
	}
	return uint32(u[9])<<16 | uint32(u[10])<<8 | uint32(u[11]), true
}

// idMilli is the Unix millisecond time in a UUIDv7 job id, read from its
// first 12 hex digits (0 for a string that is not a UUID).
func idMilli(id string) int64 {
	if len(id) != 36 || id[8] != '-' {
		return 0
	}
	var ms int64
	for i := 0; i < 13; i++ {
		if i == 8 {
			continue
		}
		c := id[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0
		}
		ms = ms<<4 | int64(v)
	}
	return ms
}
