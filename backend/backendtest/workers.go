package backendtest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// register records w at f.now, dead after a minute and expired after an hour.
func (f *fixture) register(w backend.WorkerInfo) {
	f.t.Helper()
	f.registerCommand(w)
}

// registerCommand records w as register does and returns the command
// RegisterWorker hands back.
func (f *fixture) registerCommand(w backend.WorkerInfo) backend.WorkerCommand {
	f.t.Helper()
	res, err := f.b.RegisterWorker(f.ctx, backend.RegisterWorkerParams{Worker: w, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now})
	if err != nil {
		f.t.Fatalf("RegisterWorker(%s) at %s: %v", w.ID, stamp(f.now), err)
	}
	return res.Command
}

// command gives cmd to the worker id at f.now.
func (f *fixture) command(id string, cmd backend.WorkerCommand) backend.WorkerInfo {
	f.t.Helper()
	w, err := f.b.CommandWorker(f.ctx, backend.CommandWorkerParams{ID: id, Command: cmd, Now: f.now})
	if err != nil {
		f.t.Fatalf("CommandWorker(%s, %s) at %s: %v", id, cmd, stamp(f.now), err)
	}
	return w
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
		for i := range c.Periodic {
			c.Periodic[i].LastRun, c.Periodic[i].NextRun = normTime(c.Periodic[i].LastRun), normTime(c.Periodic[i].NextRun)
		}
		if len(c.Periodic) == 0 {
			c.Periodic = nil
		}
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
			State: backend.WorkerQuiet,
			Periodic: []backend.PeriodicInfo{
				{Name: "nightly", Spec: "@daily", Queue: f.queue, Type: "report", LastRun: t0.Add(-time.Hour), NextRun: t0.Add(23 * time.Hour)},
				{Name: "tick", Spec: "@every 1m", Queue: "other", Type: "tick"},
			},
			// The store sets these; what the caller passes is ignored.
			LastSeen: t0.Add(-time.Hour), Dead: true, Command: backend.CommandStop,
		}
		f.advance(time.Second)
		if cmd := f.registerCommand(w); cmd != "" {
			t.Fatalf("RegisterWorker of a new entry returned command %q; want none (the caller's Command is ignored)", cmd)
		}
		want := *w.Clone()
		want.LastSeen, want.DeadAt, want.ExpiresAt, want.Dead, want.Command = f.now, f.now.Add(time.Minute), f.now.Add(time.Hour), false, ""
		ws := f.wantWorkers([]string{"w-1"}, "one worker registered")
		if !sameWorker(ws[0], want) {
			t.Fatalf("registered entry = %+v; want %+v", ws[0], want)
		}
		w.Queues[0], w.Running[0], w.Periodic[0].Name = "changed", "changed", "changed"
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

	t.Run("Commands", func(t *testing.T) {
		f := start(t, factory)
		f.register(backend.WorkerInfo{ID: "a", Host: "h"})
		f.register(backend.WorkerInfo{ID: "b", Host: "h"})
		got := f.command("a", backend.CommandQuiet)
		if got.ID != "a" || got.Command != backend.CommandQuiet || got.Host != "h" || got.Dead {
			t.Fatalf("CommandWorker(a, quiet) = %+v; want a's live entry with command quiet", got)
		}
		ws := f.wantWorkers([]string{"a", "b"}, "a command adds no entry")
		if ws[0].Command != backend.CommandQuiet || ws[1].Command != "" {
			t.Fatalf("Workers shows commands %q, %q; want quiet for a, none for b", ws[0].Command, ws[1].Command)
		}
		f.advance(10 * time.Second)
		for i := range 2 {
			if cmd := f.registerCommand(backend.WorkerInfo{ID: "a", Host: "h", State: backend.WorkerQuiet}); cmd != backend.CommandQuiet {
				t.Fatalf("refresh %d of a returned command %q; want quiet at every refresh (at least once)", i, cmd)
			}
		}
		if cmd := f.registerCommand(backend.WorkerInfo{ID: "b", Host: "h"}); cmd != "" {
			t.Fatalf("refresh of b returned command %q; want none", cmd)
		}
		if w := f.command("a", backend.CommandQuiet); w.Command != backend.CommandQuiet || w.State != backend.WorkerQuiet {
			t.Fatalf("CommandWorker(a, quiet) again = command %q, state %q; want quiet, quiet (the refreshed entry)", w.Command, w.State)
		}
		if w := f.command("a", backend.CommandStop); w.Command != backend.CommandStop {
			t.Fatalf("CommandWorker(a, stop) after quiet = %q; want stop", w.Command)
		}
		if w := f.command("a", backend.CommandQuiet); w.Command != backend.CommandStop {
			t.Fatalf("CommandWorker(a, quiet) after stop = %q; want stop (a command never weakens)", w.Command)
		}
		if cmd := f.registerCommand(backend.WorkerInfo{ID: "a", Host: "h", State: backend.WorkerStopping}); cmd != backend.CommandStop {
			t.Fatalf("refresh of a returned command %q; want stop", cmd)
		}

		// A dead entry takes a command; an expired or removed one does not.
		f.advance(time.Minute)
		if w := f.command("b", backend.CommandStop); !w.Dead || w.Command != backend.CommandStop {
			t.Fatalf("CommandWorker(b, stop) of a dead entry = dead %v, command %q; want dead, stop", w.Dead, w.Command)
		}
		if err := f.b.DeregisterWorker(f.ctx, backend.DeregisterWorkerParams{ID: "a"}); err != nil {
			t.Fatalf("DeregisterWorker(a): %v", err)
		}
		for _, id := range []string{"a", "never"} {
			_, err := f.b.CommandWorker(f.ctx, backend.CommandWorkerParams{ID: id, Command: backend.CommandStop, Now: f.now})
			if !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("CommandWorker(%s) of no entry = %v; want ErrNotFound", id, err)
			}
		}
		if cmd := f.registerCommand(backend.WorkerInfo{ID: "a"}); cmd != "" {
			t.Fatalf("a worker registered again after its entry was removed got command %q; want none", cmd)
		}
		f.at(time.Hour + 10*time.Second)
		_, err := f.b.CommandWorker(f.ctx, backend.CommandWorkerParams{ID: "b", Command: backend.CommandQuiet, Now: f.now})
		if !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("CommandWorker(b) at its ExpiresAt = %v; want ErrNotFound", err)
		}

		for _, c := range []struct {
			field string
			p     backend.CommandWorkerParams
		}{
			{"id", backend.CommandWorkerParams{Command: backend.CommandStop, Now: f.now}},
			{"command", backend.CommandWorkerParams{ID: "a", Command: "restart", Now: f.now}},
			{"command", backend.CommandWorkerParams{ID: "a", Now: f.now}},
			{"now", backend.CommandWorkerParams{ID: "a", Command: backend.CommandStop}},
		} {
			_, err := f.b.CommandWorker(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
		if ws := f.wantWorkers([]string{"a!"}, "only a's new entry is left, silent since"); ws[0].Command != "" {
			t.Fatalf("refused commands changed a's entry: command %q", ws[0].Command)
		}
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
			{"worker.state", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w", State: "asleep"}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now}},
			{"worker.periodic", backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w", Periodic: []backend.PeriodicInfo{{Name: "bad\x00"}}}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now}},
		} {
			_, err := f.b.RegisterWorker(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
		f.wantWorkers(nil, "every registration was refused")
		_, err := f.b.Workers(f.ctx, backend.WorkersParams{})
		wantInvalid(t, err, -1, "now")
	})
}
