package memory

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Import writes jobs with their history (see backend.Importer).
func (s *store) Import(ctx context.Context, p backend.ImportParams) (backend.ImportResult, error) {
	if err := s.lock(); err != nil {
		return backend.ImportResult{}, err
	}
	defer s.mu.Unlock()
	res := backend.ImportResult{Items: make([]backend.ImportItem, len(p.Jobs))}
	for i, j := range p.Jobs {
		if old := s.jobs[j.ID]; old != nil {
			if f := backend.SameJob(old, j); f != "" {
				res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, Reason: backend.ImportDiffers(j.ID, f)}
			} else {
				res.Items[i] = backend.ImportItem{Outcome: backend.ImportSame}
			}
			continue
		}
		if h := s.jids[j.JID]; j.JID != "" && h != "" {
			res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: h,
				Reason: backend.ImportJIDHeld(j.ID, j.JID, h)}
			continue
		}
		holds := backend.HoldsKey(j, p.Now)
		if holds {
			if h := s.holder(j.Queue, j.UniqueKey, p.Now); h != nil {
				res.Items[i] = backend.ImportItem{Outcome: backend.ImportConflict, HolderID: h.id,
					Reason: backend.ImportKeyHeld(j.ID, j.Queue, j.UniqueKey, h.id)}
				continue
			}
		}
		c := j.Clone()
		s.jobs[j.ID] = c
		s.index(c)
		if j.JID != "" {
			s.jids[j.JID] = j.ID
		}
		if holds {
			h := &hold{id: j.ID, state: j.State}
			if j.UniqueFor > 0 {
				h.until = j.CreatedAt.Add(j.UniqueFor)
			}
			s.holds[[2]string{j.Queue, j.UniqueKey}] = h
		}
		if j.State == backend.StatePending {
			s.signal(j.Queue)
		}
		res.Items[i] = backend.ImportItem{Outcome: backend.ImportCreated}
	}
	return res, nil
}
