package pebble

import (
	"fmt"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// payloadMoveBatch is about the most bytes of payloads movePayloads moves
// in one batch.
const payloadMoveBatch = 1 << 20

// movePayloads moves the payloads that format 3 and earlier stores keep
// under 'p' + id to 'x' + id (keys.go) and returns how many it moved. Each
// batch, synced, writes its payloads' new keys and deletes their old ones,
// so a payload is always under exactly one of the two. Open calls it before
// it reads anything: a store with nothing under 'p' costs it one seek, and
// a move that a crash cut short is finished at the next open.
func movePayloads(db *cpebble.DB) (moved int, err error) {
	it, err := db.NewIter(&cpebble.IterOptions{LowerBound: []byte{prefixPayloadV3}, UpperBound: []byte{prefixPayloadV3 + 1}})
	if err != nil {
		return 0, fmt.Errorf("kyu/pebble: move payloads: %w", err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("kyu/pebble: move payloads: %w", cerr)
		}
	}()
	b := db.NewBatch()
	flush := func() error {
		err := db.Apply(b, cpebble.Sync)
		_ = b.Close()
		b = db.NewBatch()
		return err
	}
	defer func() { _ = b.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
		}
		k := it.Key()
		newKey := append([]byte{prefixPayload}, k[1:]...)
		if err := b.Set(newKey, v, nil); err != nil {
			return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
		}
		if err := b.Delete(k, nil); err != nil {
			return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
		}
		moved++
		if b.Len() >= payloadMoveBatch {
			if err := flush(); err != nil {
				return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
			}
		}
	}
	if err := it.Error(); err != nil {
		return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
	}
	if !b.Empty() {
		if err := flush(); err != nil {
			return moved, fmt.Errorf("kyu/pebble: move payloads: %w", err)
		}
	}
	return moved, nil
}
