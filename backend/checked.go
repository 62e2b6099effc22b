package backend

import "context"

// Checked returns b with the contract's input checks in front of it: each
// method checks its params as the list below says and, on a failed check,
// returns the check's *ValidationError without calling b, so nothing
// changes. Checks that also give defaults (EnqueueParams.Prepare,
// ListParams.Check) hand b the params with their defaults applied. A
// store's own methods assume checked input; every store's Open returns
// its checked form, so a store's users cannot reach it unchecked, and the
// conformance suite, run on what Open returns, proves that every store
// refuses the same input. Checked of a Checked backend returns it as is.
//
// Checked covers the contract only: a store's methods beyond it (an
// optional interface such as PostgreSQL's transactional enqueue) stay
// reachable on the type its Open returns, and check their own input.
//
//   - Enqueue: EnqueueParams.Prepare (with the store's PayloadLimiter
//     bound when MaxPayload is 0).
//   - Claim, Heartbeat, Fail, Report, Subscribe, List, Stats, RetryQueue,
//     Purge, UpdateQueue, RegisterWorker, CommandWorker: the params' Check.
//   - Complete, Release, Delete, Cancel, Retry, RunNow, Promote,
//     RecoverLeases, ApplyRetention, Workers: CheckNow.
//   - Lead, Resign, Import: the params' Check.
//   - Get, WatchFinished, DeregisterWorker, Close: nothing.
func Checked(b Backend) Backend {
	if c, ok := b.(*checked); ok {
		return c
	}
	c := &checked{b: b}
	if l, ok := b.(PayloadLimiter); ok {
		c.maxPayload = l.MaxPayload()
	}
	return c
}

// PayloadLimiter is an optional interface of a store whose payload bound,
// for an Enqueue whose MaxPayload is 0, is not DefaultMaxPayload; Checked
// asks it once. backend/remote has one: the kyu server it talks to
// applies its own bound.
type PayloadLimiter interface {
	MaxPayload() int
}

// checked is the Backend that Checked returns.
type checked struct {
	b Backend
	// maxPayload is the store's PayloadLimiter bound, 0 for the default.
	maxPayload int
}

func (c *checked) Enqueue(ctx context.Context, p EnqueueParams) (EnqueueResult, error) {
	if p.MaxPayload <= 0 && c.maxPayload > 0 {
		p.MaxPayload = c.maxPayload
	}
	if err := p.Prepare(); err != nil {
		return EnqueueResult{}, err
	}
	return c.b.Enqueue(ctx, p)
}

func (c *checked) Claim(ctx context.Context, p ClaimParams) (ClaimResult, error) {
	if err := p.Check(); err != nil {
		return ClaimResult{}, err
	}
	return c.b.Claim(ctx, p)
}

func (c *checked) Heartbeat(ctx context.Context, p HeartbeatParams) (HeartbeatResult, error) {
	if err := p.Check(); err != nil {
		return HeartbeatResult{}, err
	}
	return c.b.Heartbeat(ctx, p)
}

func (c *checked) Complete(ctx context.Context, p CompleteParams) (BatchResult, error) {
	if err := CheckNow(p.Now); err != nil {
		return BatchResult{}, err
	}
	return c.b.Complete(ctx, p)
}

func (c *checked) Fail(ctx context.Context, p FailParams) (BatchResult, error) {
	if err := p.Check(); err != nil {
		return BatchResult{}, err
	}
	return c.b.Fail(ctx, p)
}

func (c *checked) Release(ctx context.Context, p ReleaseParams) (BatchResult, error) {
	if err := CheckNow(p.Now); err != nil {
		return BatchResult{}, err
	}
	return c.b.Release(ctx, p)
}

func (c *checked) Report(ctx context.Context, p ReportParams) (BatchResult, error) {
	if err := p.Check(); err != nil {
		return BatchResult{}, err
	}
	return c.b.Report(ctx, p)
}

func (c *checked) Subscribe(ctx context.Context, p SubscribeParams) (*Subscription, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return c.b.Subscribe(ctx, p)
}

func (c *checked) Get(ctx context.Context, p GetParams) (*Job, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return c.b.Get(ctx, p)
}

func (c *checked) List(ctx context.Context, p ListParams) (ListResult, error) {
	if _, err := p.Check(); err != nil {
		return ListResult{}, err
	}
	return c.b.List(ctx, p)
}

func (c *checked) Stats(ctx context.Context, p StatsParams) (Stats, error) {
	if err := p.Check(); err != nil {
		return Stats{}, err
	}
	return c.b.Stats(ctx, p)
}

func (c *checked) Workers(ctx context.Context, p WorkersParams) ([]WorkerInfo, error) {
	if err := CheckNow(p.Now); err != nil {
		return nil, err
	}
	return c.b.Workers(ctx, p)
}

func (c *checked) WatchFinished(ctx context.Context, p WatchParams) (*Subscription, error) {
	return c.b.WatchFinished(ctx, p)
}

func (c *checked) Cancel(ctx context.Context, p CancelParams) (*Job, error) {
	if err := CheckNow(p.Now); err != nil {
		return nil, err
	}
	return c.b.Cancel(ctx, p)
}

func (c *checked) Retry(ctx context.Context, p RetryParams) (*Job, error) {
	if err := CheckNow(p.Now); err != nil {
		return nil, err
	}
	return c.b.Retry(ctx, p)
}

func (c *checked) RunNow(ctx context.Context, p RunNowParams) (*Job, error) {
	if err := CheckNow(p.Now); err != nil {
		return nil, err
	}
	return c.b.RunNow(ctx, p)
}

func (c *checked) RetryQueue(ctx context.Context, p RetryQueueParams) (CountResult, error) {
	if err := p.Check(); err != nil {
		return CountResult{}, err
	}
	return c.b.RetryQueue(ctx, p)
}

func (c *checked) Purge(ctx context.Context, p PurgeParams) (CountResult, error) {
	if err := p.Check(); err != nil {
		return CountResult{}, err
	}
	return c.b.Purge(ctx, p)
}

func (c *checked) Delete(ctx context.Context, p DeleteParams) error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	return c.b.Delete(ctx, p)
}

func (c *checked) UpdateQueue(ctx context.Context, p UpdateQueueParams) (QueueSettings, error) {
	if err := p.Check(); err != nil {
		return QueueSettings{}, err
	}
	return c.b.UpdateQueue(ctx, p)
}

func (c *checked) Promote(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error) {
	if err := CheckNow(p.Now); err != nil {
		return MaintenanceResult{}, err
	}
	return c.b.Promote(ctx, p)
}

func (c *checked) RecoverLeases(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error) {
	if err := CheckNow(p.Now); err != nil {
		return MaintenanceResult{}, err
	}
	return c.b.RecoverLeases(ctx, p)
}

func (c *checked) ApplyRetention(ctx context.Context, p MaintenanceParams) (MaintenanceResult, error) {
	if err := CheckNow(p.Now); err != nil {
		return MaintenanceResult{}, err
	}
	return c.b.ApplyRetention(ctx, p)
}

func (c *checked) RegisterWorker(ctx context.Context, p RegisterWorkerParams) (RegisterWorkerResult, error) {
	if err := p.Check(); err != nil {
		return RegisterWorkerResult{}, err
	}
	return c.b.RegisterWorker(ctx, p)
}

func (c *checked) CommandWorker(ctx context.Context, p CommandWorkerParams) (WorkerInfo, error) {
	if err := p.Check(); err != nil {
		return WorkerInfo{}, err
	}
	return c.b.CommandWorker(ctx, p)
}

func (c *checked) DeregisterWorker(ctx context.Context, p DeregisterWorkerParams) error {
	return c.b.DeregisterWorker(ctx, p)
}

func (c *checked) Close() error {
	return c.b.Close()
}

func (c *checked) Lead(ctx context.Context, p LeadParams) (Leadership, error) {
	if err := p.Check(); err != nil {
		return Leadership{}, err
	}
	return c.b.Lead(ctx, p)
}

func (c *checked) Resign(ctx context.Context, p ResignParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	return c.b.Resign(ctx, p)
}

func (c *checked) Import(ctx context.Context, p ImportParams) (ImportResult, error) {
	if err := p.Check(); err != nil {
		return ImportResult{}, err
	}
	return c.b.Import(ctx, p)
}
