package pebble

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// UpdateQueue changes a queue's settings and returns them, durably. The
// settings live under their own key ('q' + queue) and in the queue's
// in-memory index, loaded at open. Resuming a paused queue signals its
// subscribers.
func (s *store) UpdateQueue(ctx context.Context, p backend.UpdateQueueParams) (backend.QueueSettings, error) {
	if err := s.begin(ctx); err != nil {
		return backend.QueueSettings{}, err
	}
	defer s.end()
	if err := s.lockState(); err != nil {
		return backend.QueueSettings{}, err
	}
	qi := s.idx.queue(p.Queue)
	st := qi.settings
	resumed := false
	if p.Paused != nil {
		resumed = st.Paused && !*p.Paused
		st.Paused = *p.Paused
	}
	if p.Retention != nil {
		st.Retention = *p.Retention
	}
	qi.settings, qi.hasSettings = st, true
	g := s.group()
	_ = g.batch.Set(settingsKey(p.Queue), encodeSettings(st), nil)
	if resumed && qi.byState[stateCode(backend.StatePending)].len() > 0 {
		s.wake(p.Queue)
	}
	s.unlock()
	if err := wait(g); err != nil {
		return backend.QueueSettings{}, err
	}
	return st, nil
}

// encodeSettings is a settings value: a version byte, a paused byte, then
// the completed, failed and cancelled retention overrides as varints.
func encodeSettings(st backend.QueueSettings) []byte {
	b := []byte{uniqueVersion, 0}
	if st.Paused {
		b[1] = 1
	}
	for _, r := range []backend.Retention{st.Retention.Completed, st.Retention.Failed, st.Retention.Cancelled} {
		b = binary.AppendVarint(b, int64(r))
	}
	return b
}

func decodeSettings(b []byte) (backend.QueueSettings, error) {
	var st backend.QueueSettings
	bad := fmt.Errorf("%w: bad queue settings", errCorruptRecord)
	if len(b) < 2 || b[0] != uniqueVersion || b[1] > 1 {
		return st, bad
	}
	st.Paused = b[1] == 1
	d := decoder{b: b[2:]}
	st.Retention.Completed = backend.Retention(d.varint())
	st.Retention.Failed = backend.Retention(d.varint())
	st.Retention.Cancelled = backend.Retention(d.varint())
	if d.err != nil || len(d.b) != 0 || !st.Retention.Valid() {
		return st, bad
	}
	return st, nil
}
