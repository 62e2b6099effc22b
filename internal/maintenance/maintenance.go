// Package maintenance runs a store's three maintenance steps (promoting
// due scheduled and retry jobs, recovering expired leases, applying
// retention). Every Worker and every kyu server runs a Maintainer, and
// the Maintainers sharing a store elect one of them (backend.Leader) to
// run the steps; the others stand by.
package maintenance

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Limit is how many jobs one step may touch; a step that reaches it is
// repeated at once.
const Limit = 1000

// Step is one maintenance call of a store and how to count its work.
type Step struct {
	// Name is the step's name in the REST API and in logs: promote,
	// recover or retention.
	Name string
	Run  func(context.Context, backend.MaintenanceParams) (backend.MaintenanceResult, error)
	// Work is how many jobs a call touched, to compare with its Limit.
	Work func(backend.MaintenanceResult) int
}

// Steps returns b's three steps.
func Steps(b backend.Maintainer) [3]Step {
	return [3]Step{
		{"promote", b.Promote, PromoteWork},
		{"recover", b.RecoverLeases, MovedWork},
		{"retention", b.ApplyRetention, MovedWork},
	}
}

// PromoteWork counts the jobs Promote touched: those it promoted and those
// it cancelled by deadline, two separate sets.
func PromoteWork(r backend.MaintenanceResult) int { return r.Moved + r.Cancelled }

// MovedWork counts the jobs RecoverLeases or ApplyRetention touched: Moved.
// RecoverLeases' Failed counts a subset of Moved, so it is not added.
func MovedWork(r backend.MaintenanceResult) int { return r.Moved }
