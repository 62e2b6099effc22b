package pebble

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"

	"github.com/google/uuid"
)

// countingReader counts the reads made of r.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// An idSource makes distinct, increasing UUIDv7s, and reads its random
// bits a block at a time: 64 ids cost one read of the source.
func TestIDSourceReadsBlocks(t *testing.T) {
	t.Parallel()
	src := &countingReader{r: rand.Reader}
	ids := newIDSource(src)
	got := make([]jobID, 64)
	for i := range got {
		if err := ids.fill(got[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if src.reads != 1 {
		t.Fatalf("64 ids read the source %d times; want 1", src.reads)
	}
	for i, id := range got {
		if v := uuid.UUID(id).Version(); v != 7 {
			t.Fatalf("id %d is version %d; want 7", i, v)
		}
		if i > 0 && bytes.Compare(got[i-1][:], id[:]) >= 0 {
			t.Fatalf("id %d (%s) does not sort after id %d (%s)", i, uuid.UUID(id), i-1, uuid.UUID(got[i-1]))
		}
	}
	more := make([]jobID, 65)
	if err := ids.fill(more); err != nil {
		t.Fatal(err)
	}
	if src.reads != 3 {
		t.Fatalf("129 ids read the source %d times; want 3", src.reads)
	}
}
