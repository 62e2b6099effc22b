package api

import (
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Count says how many jobs one bulk operation changed.
type Count struct {
	Count int `json:"count"`
}

// MaintenanceRequest drives one maintenance step (POST
// /api/v1/maintenance/{step}); Limit 0 means the store's own bound.
type MaintenanceRequest struct {
	Limit int `json:"limit,omitempty"`
}

// MaintenanceResult counts what one maintenance step did.
type MaintenanceResult struct {
	Moved     int `json:"moved"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// QueueUpdate is the body of PATCH /api/v1/queues/{name}: each field
// present replaces its setting.
type QueueUpdate struct {
	Paused    *bool                   `json:"paused,omitempty"`
	Retention *backend.QueueRetention `json:"retention,omitempty"`
}

// Queue is one queue with its counts per state and its settings.
type Queue struct {
	Name          string                  `json:"name"`
	Counts        map[backend.State]int64 `json:"counts"`
	Paused        bool                    `json:"paused"`
	Retention     backend.QueueRetention  `json:"retention"`
	OldestPending time.Time               `json:"oldest_pending,omitzero"`
	// LastFiveMinutes and LastHour count the attempts that ended in the
	// queue lately (backend.QueueInfo): its throughput and error rate.
	LastFiveMinutes backend.AttemptCount `json:"last_5m"`
	LastHour        backend.AttemptCount `json:"last_hour"`
}

// FromQueueInfo converts a queue's statistics for the wire.
func FromQueueInfo(q backend.QueueInfo) Queue {
	return Queue{Name: q.Name, Counts: q.Counts, Paused: q.Settings.Paused, Retention: q.Settings.Retention, OldestPending: q.OldestPending,
		LastFiveMinutes: q.LastFiveMinutes, LastHour: q.LastHour}
}

// Backend converts the queue back to the store's form.
func (q Queue) Backend() backend.QueueInfo {
	return backend.QueueInfo{Name: q.Name, Counts: q.Counts, Settings: backend.QueueSettings{Paused: q.Paused, Retention: q.Retention}, OldestPending: q.OldestPending,
		LastFiveMinutes: q.LastFiveMinutes, LastHour: q.LastHour}
}

// QueueList is the body of GET /api/v1/queues.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// Minute counts the attempts that ended in one minute.
type Minute struct {
	Minute    time.Time `json:"minute"`
	Processed int64     `json:"processed"`
	Failed    int64     `json:"failed"`
}

// Stats is the body of GET /api/v1/stats.
type Stats struct {
	Queues    []Queue  `json:"queues"`
	Minutes   []Minute `json:"minutes"`
	Processed int64    `json:"processed"`
	Failed    int64    `json:"failed"`
}

// FromStats converts statistics for the wire.
func FromStats(s backend.Stats) Stats {
	out := Stats{Queues: make([]Queue, len(s.Queues)), Minutes: make([]Minute, len(s.Minutes)), Processed: s.Processed, Failed: s.Failed}
	for i, q := range s.Queues {
		out.Queues[i] = FromQueueInfo(q)
	}
	for i, m := range s.Minutes {
		out.Minutes[i] = Minute(m)
	}
	return out
}

// Backend converts statistics back to the store's form.
func (s Stats) Backend() backend.Stats {
	out := backend.Stats{Processed: s.Processed, Failed: s.Failed}
	for _, q := range s.Queues {
		out.Queues = append(out.Queues, q.Backend())
	}
	for _, m := range s.Minutes {
		out.Minutes = append(out.Minutes, backend.MinuteCount(m))
	}
	return out
}

// WorkerList is the body of GET /api/v1/workers.
type WorkerList struct {
	Workers []backend.WorkerInfo `json:"workers"`
}

// WorkerRegistered is the answer to PUT /api/v1/workers/{id}: the command
// recorded for the worker ("" for none), which it is to obey.
type WorkerRegistered struct {
	Command backend.WorkerCommand `json:"command"`
}

// PeriodicList is the body of GET /api/v1/periodic: the periodic
// schedules that live workers run, one per name (the one of the worker
// registered last), by name, each with the ids of the workers that run it.
type PeriodicList struct {
	Periodic []Periodic `json:"periodic"`
}

// Periodic is one schedule of PeriodicList.
type Periodic struct {
	backend.PeriodicInfo
	Workers []string `json:"workers"`
}

// WorkerRegistration is the body of PUT /api/v1/workers/{id}.
type WorkerRegistration struct {
	Worker      backend.WorkerInfo `json:"worker"`
	DeadAfter   Duration           `json:"dead_after"`
	ExpireAfter Duration           `json:"expire_after"`
}
