package remote

import (
	"context"

	"github.com/kyuhq/kyu/backend"
)

// Lead answers backend.ErrLeadElsewhere: the kyu server behind this
// backend maintains its store (elected among the servers and direct
// workers sharing that store), so a process that reaches it over HTTP runs
// no maintenance and sends no request for it.
func (b *httpBackend) Lead(ctx context.Context, p backend.LeadParams) (backend.Leadership, error) {
	return backend.Leadership{}, backend.ErrLeadElsewhere
}

// Resign does nothing: Lead never grants a lease here.
func (b *httpBackend) Resign(ctx context.Context, p backend.ResignParams) error {
	return nil
}
