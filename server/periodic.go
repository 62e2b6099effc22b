package server

import (
	"cmp"
	"slices"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/server/api"
)

// PeriodicOf lists the periodic schedules of the live (not dead) workers
// in ws, one per name, by name: each the entry of the worker seen last,
// with the ids of every worker that runs a schedule of that name. Workers
// that run the same schedules each register them; the name is the
// schedule's identity.
func PeriodicOf(ws []backend.WorkerInfo) []api.Periodic {
	byName := map[string]*api.Periodic{}
	seen := map[string]backend.WorkerInfo{}
	for _, w := range ws {
		if w.Dead {
			continue
		}
		for _, p := range w.Periodic {
			e := byName[p.Name]
			if e == nil {
				e = &api.Periodic{}
				byName[p.Name] = e
			}
			if last, ok := seen[p.Name]; !ok || w.LastSeen.After(last.LastSeen) {
				e.PeriodicInfo = p
				seen[p.Name] = w
			}
			e.Workers = append(e.Workers, w.ID)
		}
	}
	out := make([]api.Periodic, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b api.Periodic) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
