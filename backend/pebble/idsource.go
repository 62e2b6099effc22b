package pebble

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"sync"

	"github.com/google/uuid"
)

// idRandBlock is how many bytes of crypto/rand an idSource reads at a
// time: the random bits of 64 ids.
const idRandBlock = 64 * 16

// idSource makes the ids of new jobs: UUIDv7s, as backend.NewID makes
// them, whose random bits come from crypto/rand a block at a time rather
// than one read per id. After an idle pause a read of crypto/rand took
// about 4 µs on a 2-core VM (0.2 µs back to back), on the path of every
// job enqueued alone; from the block an id takes about as long as when
// hot. The bytes are as random; only the reads are fewer.
type idSource struct {
	mu sync.Mutex
	r  *bufio.Reader
}

// newIDSource returns an idSource reading its random bits from r.
func newIDSource(r io.Reader) *idSource {
	return &idSource{r: bufio.NewReaderSize(r, idRandBlock)}
}

// fill sets ids to new ids.
func (s *idSource) fill(ids []jobID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ids {
		id, err := uuid.NewV7FromReader(s.r)
		if err != nil {
			return fmt.Errorf("kyu/pebble: new id: %w", err)
		}
		ids[i] = jobID(id)
	}
	return nil
}

// newSystemIDSource returns the idSource of a store: crypto/rand's.
func newSystemIDSource() *idSource { return newIDSource(rand.Reader) }
