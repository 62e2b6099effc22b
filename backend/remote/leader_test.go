package remote_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/remote"
)

// A process over HTTP never maintains the store: Lead answers
// ErrLeadElsewhere without asking the server (none listens here), after
// the input checks every store makes.
func TestLeadElsewhere(t *testing.T) {
	t.Parallel()
	b, err := remote.Open("http://127.0.0.1:1", remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	p := backend.LeadParams{Name: backend.MaintenanceLeadership, Holder: "w1", TTL: time.Second, Now: now}
	if _, err := b.Lead(t.Context(), p); !errors.Is(err, backend.ErrLeadElsewhere) {
		t.Fatalf("Lead = %v; want ErrLeadElsewhere", err)
	}
	p.TTL = 0
	var ve *backend.ValidationError
	if _, err := b.Lead(t.Context(), p); !errors.As(err, &ve) {
		t.Fatalf("Lead with no TTL = %v; want a *backend.ValidationError", err)
	}
	if err := b.Resign(t.Context(), backend.ResignParams{Name: backend.MaintenanceLeadership, Holder: "w1", Epoch: 1, Now: now}); err != nil {
		t.Fatalf("Resign = %v; want nil", err)
	}
}
