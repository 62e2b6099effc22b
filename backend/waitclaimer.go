package backend

import "context"

// WaitingClaimer is the optional ability of a store to hold a claim that
// finds nothing until a job it may take becomes pending, and to fill it in
// the write that makes the job pending: the job is enqueued and claimed
// with one commit instead of two. kyu.Worker finds it by type assertion on
// the store it runs on and otherwise claims and waits for wake-up signals.
type WaitingClaimer interface {
	// ClaimWait claims as Claim does; when Claim would take nothing, it
	// waits until it can take at least one job and returns the jobs it
	// took then (their lease starts when they are taken). If ctx ends, or
	// the store closes, before the claim is filled, it returns the error
	// and has claimed nothing: jobs taken for it as it gave up are released
	// at once. A claim filled before ctx ends returns its jobs, even when
	// writing them ends after. p is checked as Claim checks it.
	ClaimWait(ctx context.Context, p ClaimParams) (ClaimResult, error)
}
