package postgres

import (
	"encoding/binary"
	"time"
)

// pgEpoch is PostgreSQL's time zero, 2000-01-01 UTC, in Unix microseconds.
const pgEpoch = 946684800000000

// copyStream builds rows in PostgreSQL's binary COPY format: a header,
// per row the count of its fields and each field as its length (-1 for
// NULL) and its binary value, and a trailer of -1 (bytes).
type copyStream struct{ b []byte }

// newCopyStream starts a stream with room for about size bytes.
func newCopyStream(size int) *copyStream {
	c := &copyStream{b: make([]byte, 0, 21+size)}
	c.b = append(c.b, "PGCOPY\n\377\r\n\000"...)
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // flags
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // header extension
	return c
}

// row starts a row of n fields.
func (c *copyStream) row(n uint16) { c.b = binary.BigEndian.AppendUint16(c.b, n) }

// field writes raw bytes (bytea, uuid).
func (c *copyStream) field(v []byte) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
}

// text writes a text value.
func (c *copyStream) text(v string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
}

// null writes NULL.
func (c *copyStream) null() { c.b = binary.BigEndian.AppendUint32(c.b, 0xFFFFFFFF) }

// nullText writes v, or NULL for "".
func (c *copyStream) nullText(v string) {
	if v == "" {
		c.null()
		return
	}
	c.text(v)
}

// nullBytes writes v, or NULL for nil.
func (c *copyStream) nullBytes(v []byte) {
	if v == nil {
		c.null()
		return
	}
	c.field(v)
}

// boolean writes a boolean.
func (c *copyStream) boolean(v bool) {
	c.b = binary.BigEndian.AppendUint32(c.b, 1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// i16, i32 and i64 write integers of those widths.
func (c *copyStream) i16(v int16) {
	c.b = binary.BigEndian.AppendUint32(c.b, 2)
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(v))
}

func (c *copyStream) i32(v int32) {
	c.b = binary.BigEndian.AppendUint32(c.b, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyStream) i64(v int64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

// timestamp writes t as timestamptz, or NULL when valid is false: as pgx
// encodes it, microseconds, the nanoseconds truncated.
func (c *copyStream) timestamp(t time.Time, valid bool) {
	if !valid {
		c.null()
		return
	}
	c.i64(t.Unix()*1000000 + int64(t.Nanosecond())/1000 - pgEpoch)
}

// jsonb writes JSON text as jsonb, or NULL for nil.
func (c *copyStream) jsonb(v []byte) {
	if v == nil {
		c.null()
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)+1))
	c.b = append(c.b, 1) // jsonb's binary format version
	c.b = append(c.b, v...)
}

// end writes the trailer and returns the stream.
func (c *copyStream) end() []byte { return binary.BigEndian.AppendUint16(c.b, 0xFFFF) }
