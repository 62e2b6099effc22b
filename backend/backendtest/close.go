package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func testClose(t *testing.T, factory Factory) {
	t.Run("CallsAfterClose", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{})
		if err := f.b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		checks := map[string]error{}
		_, checks["Enqueue"] = f.b.Enqueue(f.ctx, backend.EnqueueParams{Jobs: []backend.NewJob{f.fill(backend.NewJob{})}, Now: f.now})
		_, checks["Claim"] = f.b.Claim(f.ctx, f.claimParams(1))
		_, checks["Get"] = f.b.Get(f.ctx, backend.GetParams{ID: id})
		checks["Delete"] = f.b.Delete(f.ctx, backend.DeleteParams{ID: id, Now: f.now})
		_, checks["Heartbeat"] = f.b.Heartbeat(f.ctx, backend.HeartbeatParams{Leases: []backend.Lease{{JobID: id, Token: 1}}, Extend: testLease, Now: f.now})
		_, checks["Complete"] = f.b.Complete(f.ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: id, Token: 1}}}, Now: f.now})
		_, checks["Fail"] = f.b.Fail(f.ctx, backend.FailParams{Items: []backend.FailItem{{Lease: backend.Lease{JobID: id, Token: 1}}}, Now: f.now})
		_, checks["Release"] = f.b.Release(f.ctx, backend.ReleaseParams{Leases: []backend.Lease{{JobID: id, Token: 1}}, Now: f.now})
		_, checks["Promote"] = f.b.Promote(f.ctx, backend.MaintenanceParams{Now: f.now})
		_, checks["RecoverLeases"] = f.b.RecoverLeases(f.ctx, backend.MaintenanceParams{Now: f.now})
		_, checks["ApplyRetention"] = f.b.ApplyRetention(f.ctx, backend.MaintenanceParams{Now: f.now})
		_, checks["Subscribe"] = f.b.Subscribe(f.ctx, backend.SubscribeParams{Queues: []string{f.queue}})
		_, checks["Cancel"] = f.b.Cancel(f.ctx, backend.CancelParams{ID: id, Now: f.now})
		_, checks["Retry"] = f.b.Retry(f.ctx, backend.RetryParams{ID: id, Now: f.now})
		_, checks["RunNow"] = f.b.RunNow(f.ctx, backend.RunNowParams{ID: id, Now: f.now})
		_, checks["RetryQueue"] = f.b.RetryQueue(f.ctx, backend.RetryQueueParams{Queue: f.queue, State: backend.StateFailed, Limit: 1, Now: f.now})
		_, checks["Purge"] = f.b.Purge(f.ctx, backend.PurgeParams{Queue: f.queue, State: backend.StatePending, Limit: 1, Now: f.now})
		_, checks["Report"] = f.b.Report(f.ctx, backend.ReportParams{Items: []backend.ReportItem{{Lease: backend.Lease{JobID: id, Token: 1}}}, Now: f.now})
		_, checks["WatchFinished"] = f.b.WatchFinished(f.ctx, backend.WatchParams{IDs: []string{id}})
		paused := true
		_, checks["UpdateQueue"] = f.b.UpdateQueue(f.ctx, backend.UpdateQueueParams{Queue: f.queue, Paused: &paused, Now: f.now})
		_, checks["List"] = f.b.List(f.ctx, backend.ListParams{})
		_, checks["Stats"] = f.b.Stats(f.ctx, backend.StatsParams{Now: f.now})
		_, checks["CommandWorker"] = f.b.CommandWorker(f.ctx, backend.CommandWorkerParams{ID: "w", Command: backend.CommandStop, Now: f.now})
		_, checks["RegisterWorker"] = f.b.RegisterWorker(f.ctx, backend.RegisterWorkerParams{Worker: backend.WorkerInfo{ID: "w"}, DeadAfter: time.Minute, ExpireAfter: time.Hour, Now: f.now})
		checks["DeregisterWorker"] = f.b.DeregisterWorker(f.ctx, backend.DeregisterWorkerParams{ID: "w"})
		_, checks["Workers"] = f.b.Workers(f.ctx, backend.WorkersParams{Now: f.now})
		for op, err := range checks {
			if !errors.Is(err, backend.ErrClosed) {
				t.Errorf("%s after Close = %v; want ErrClosed", op, err)
			}
		}
		// A second Close (the factory's cleanup makes a third) must not panic.
		f.b.Close()
	})
}
