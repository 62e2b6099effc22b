package move_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/backend"
)

// TestFillForSpeed writes N pending jobs of 100-byte payloads into the
// embedded store at DIR when KYU_TEST_MOVE_FILL is "DIR,N": the source of
// the speed figures in docs/benchmarks.md (measured with kyu copy).
func TestFillForSpeed(t *testing.T) {
	v := os.Getenv("KYU_TEST_MOVE_FILL")
	if v == "" {
		t.Skip("set KYU_TEST_MOVE_FILL=DIR,N")
	}
	dir, ns, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(ns)
	if err != nil {
		t.Fatal(err)
	}
	b := openPebble(t, dir)
	payload := []byte(`{"to":"someone@example.com","subject":"hello","body":"` + strings.Repeat("x", 100-56) + `"}`)
	if len(payload) != 100 {
		t.Fatalf("payload of %d bytes", len(payload))
	}
	for done := 0; done < n; done += 1000 {
		p := backend.EnqueueParams{Now: t0}
		for range min(1000, n-done) {
			p.Jobs = append(p.Jobs, backend.NewJob{Type: "email.send", Queue: "emails", Payload: payload})
		}
		if _, err := b.Enqueue(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}
