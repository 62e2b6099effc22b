package backendtest

import (
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// register records w at f.now, dead after a minute and expired after an hour.
func (f *fixture) register(w backend.WorkerInfo) {
	f.t.Helper()
	err := f.b.RegisterWorker(f.ctx, backend.RegisterWorkerParams{Worker: w, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now})
	if err != nil {
		f.t.Fatalf("RegisterWorker(%s) at %s: %v", w.ID, stamp(f.now), err)
	}
}

// workers lists the registry at f.now.
func (f *fixture) workers() []backend.WorkerInfo {
	f.t.Helper()
	ws, err := f.b.Workers(f.ctx, backend.WorkersParams{Now: f.now})
	if err != nil {
		f.t.Fatalf("Workers at %s: %v", stamp(f.now), err)
	}
	return ws
}

// workerIDs lists the ids of ws, marking dead ones with a "!" suffix.
func workerIDs(ws []backend.WorkerInfo) []string {
	var out []string
	for _, w := range ws {
		id := w.ID
		if w.Dead {
			id += "!"
		}
		out = append(out, id)
	}
	return out
}

// wantWorkers checks the registry at f.now: ids in order, "!" for dead.
func (f *fixture) wantWorkers(want []string, why string) []backend.WorkerInfo {
	f.t.Helper()
	ws := f.workers()
	if got := workerIDs(ws); !reflect.DeepEqual(got, want) {
		f.t.Fatalf("Workers at %s = %v; want %v: %s", stamp(f.now), got, want, why)
	}
	return ws
}

// sameWorker compares two registry entries, times to the millisecond.
func sameWorker(a, b backend.WorkerInfo) bool {
	norm := func(w backend.WorkerInfo) backend.WorkerInfo {
		c := w.Clone()
		c.StartedAt, c.LastSeen, c.DeadAt, c.ExpiresAt = normTime(c.StartedAt), normTime(c.LastSeen), normTime(c.DeadAt), normTime(c.ExpiresAt)
		if len(c.Queues) == 0 {
			c.Queues = nil
		}
		if len(c.Running) == 0 {
			c.Running = nil
		}
		return *c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func testWorkers(t *testing.T, factory Factory) {
	t.Run("RoundTrip", func(t *testing.T) {
		f := start(t, factory)
		w := backend.WorkerInfo{
			ID: "w-1", Host: "host-a", PID: 4242, Queues: []string{f.queue, "other"}, Concurrency: 8,
			StartedAt: t0.Add(-time.Hour), Version: "v1.2.3", Running: []string{"job-a", "job-b"}, Processed: 10, Failed: 2,
			// The store sets these; what the caller passes is ignored.
			LastSeen: t0.Add(-time.Hour), Dead: true,
		}
		f.advance(time.Second)
		f.register(w)
		want := *w.Clone()
		want.LastSeen, want.DeadAt, want.ExpiresAt, want.Dead = f.now, f.now.Add(time.Minute), f.now.Add(time.Hour), false
		ws := f.wantWorkers([]string{"w-1"}, "one worker registered")
		if !sameWorker(ws[0], want) {
			t.Fatalf("registered entry = %+v; want %+v", ws[0], want)
		}
		w.Queues[0], w.Running[0] = "changed", "changed"
		if ws := f.workers(); !sameWorker(ws[0], want) {
			t.Fatalf("entry changed with the caller's slices: %+v; a store copies what it is given", ws[0])
		}
	})

	t.Run("RefreshReplaces", func(t *testing.T) {
		f := start(t, factory)
		f.register(backend.WorkerInfo{ID: "w", Host: "h", Running: []string{"a", "b"}, Processed: 1})
		f.advance(50 * time.Second)
		refreshed := backend.WorkerInfo{ID: "w", Host: "h", Running: []string{"c"}, Processed: 7, Failed: 1}
		f.register(refreshed)
		want := refreshed
		want.LastSeen, want.DeadAt, want.ExpiresAt = f.now, f.now.Add(time.Minute), f.now.Add(time.Hour)
		ws := f.wantWorkers([]string{"w"}, "a refresh replaces the entry, it adds none")
		if !sameWorker(ws[0], want) {
			t.Fatalf("refreshed entry = %+v; want %+v", ws[0], want)
		}
		f.advance(59 * time.Second)
		f.wantWorkers([]string{"w"}, "the refresh moved DeadAt on")
	})

	t.Run("DeadAndExpired", func(t *testing.T) {
		f := start(t, factory)
		f.register(backend.WorkerInfo{ID: "w"})
		f.at(time.Minute - time.Millisecond)
		f.wantWorkers([]string{"w"}, "1ms before DeadAt the worker is alive")
		f.at(time.Minute)
		ws := f.wantWorkers([]string{"w!"}, "a worker is dead from DeadAt on")
		f.wantTime("DeadAt", ws[0].DeadAt, t0.Add(time.Minute))
		f.at(time.Hour - time.Millisecond)
		f.wantWorkers([]string{"w!"}, "1ms before ExpiresAt the dead entry is still shown")
		f.at(time.Hour)
		f.wantWorkers(nil, "an entry is never returned from ExpiresAt on")
		f.applyRetention()
		f.wantWorkers(nil, "an expired entry stays gone")
		f.at(0)
		f.register(backend.WorkerInfo{ID: "w"})
		f.wantWorkers([]string{"w"}, "a worker that registers again is back")
	})

	t.Run("Deregister", func(t *testing.T) {
		f := start(t, factory)
		f.register(backend.WorkerInfo{ID: "a"})
		f.register(backend.WorkerInfo{ID: "b"})
		if err := f.b.DeregisterWorker(f.ctx, backend.DeregisterWorkerParams{ID: "a"}); err != nil {
			t.Fatalf("DeregisterWorker(a): %v", err)
		}
		f.wantWorkers([]string{"b"}, "a was deregistered")
		for _, id := range []string{"a", "never-registered"} {
			if err := f.b.DeregisterWorker(f.ctx, backend.DeregisterWorkerParams{ID: id}); err != nil {
				t.Fatalf("DeregisterWorker(%s) of an unknown id = %v; want nil", id, err)
			}
		}
		f.wantWorkers([]string{"b"}, "deregistering unknown ids changes nothing")
	})

	t.Run("SortedByID", func(t *testing.T) {
		f := start(t, factory)
		for _, id := range []string{"m", "b", "z", "a"} {
			f.register(backend.WorkerInfo{ID: id})
			f.advance(10 * time.Second)
		}
		// b registered at +10s: dead at +70s; a at +30s, alive.
		f.at(75 * time.Second)
		f.wantWorkers([]string{"a", "b!", "m!", "z"}, "entries by id, the silent ones dead")
	})

	t.Run("Checks", func(t *testing.T) {
		f := start(t, factory)
		long := make([]byte, 257)
		for i := range long {
			long[i] = 'w'
		}
		for _, c := range []struct {
			field string
			p     backend.RegisterWorkerParams
		}{
			{"worker.id", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now}},
			{"worker.id", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: string(long)}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now}},
			{"dead_after", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w"}, DeadAfter: 0, ExpireAfter: time.Hour, Now: f.now}},
			{"expire_after", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w"}, DeadAfter: time.Hour, ExpireAfter: time.Minute, Now: f.now}},
			{"expire_after", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w"}, DeadAfter: time.Hour, ExpireAfter: 2 * time.Hour, Now: backend.MaxTime().Add(-time.Hour)}},
			{"now", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w"}, DeadAfter: time.Minute, ExpireAfter: time.Hour}},
		} {
			err := f.b.RegisterWorker(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
		f.wantWorkers(nil, "every registration was refused")
		_, err := f.b.Workers(f.ctx, backend.WorkersParams{})
		wantInvalid(t, err, -1, "now")
	})
}
