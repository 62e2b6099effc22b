package redis

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/backendtest"
)

// TestConformanceEvalsha runs the suite with the scripts sent by EVALSHA,
// as on a server that refuses functions.
func TestConformanceEvalsha(t *testing.T) {
	openTest(t, "")
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		s := openTest(t, "")
		s.noFunctions.Store(true)
		return s
	})
}

// roundTrip enqueues, claims and completes one job.
func roundTrip(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Now: time.Now(), Jobs: []backend.NewJob{{Type: "t", Queue: "q", Payload: []byte("x")}}}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	res, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, WorkerID: "w", Now: time.Now()})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(res.Jobs), err)
	}
	j := res.Jobs[0]
	out, err := s.Complete(ctx, backend.CompleteParams{Items: []backend.CompleteItem{{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}}, Now: time.Now()})
	if err != nil || out.Errors[0] != nil {
		t.Fatalf("complete: %v %v", err, out.Errors)
	}
}

// TestFunctionsReloaded: a server that lost the library (FUNCTION FLUSH,
// a restart without persistence) gets it again at the next call.
func TestFunctionsReloaded(t *testing.T) {
	t.Parallel()
	ps := startServer(t, "--appendonly", "no")
	s, err := Open(context.Background(), Options{Addrs: []string{ps.addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s)
	if out, err := ps.cli("FUNCTION", "FLUSH"); err != nil {
		t.Fatalf("function flush: %v %s", err, out)
	}
	roundTrip(t, s)
	out, err := ps.cli("FUNCTION", "LIST")
	if err != nil || !strings.Contains(out, s.scripts.lib.name) {
		t.Fatalf("library %s not loaded again: %v %s", s.scripts.lib.name, err, out)
	}
	if s.noFunctions.Load() || !s.RunsFunctions() {
		t.Fatal("store fell back to EVALSHA")
	}
}

// TestFunctionsRefused: on a server that refuses FUNCTION, the store runs
// its scripts by EVALSHA, and says so: a warning at Open with the
// server's error and what it costs, and RunsFunctions.
func TestFunctionsRefused(t *testing.T) {
	t.Parallel()
	ps := startServer(t, "--appendonly", "no", "--rename-command", "FUNCTION", "")
	logs := &records{}
	s, err := Open(context.Background(), Options{Addrs: []string{ps.addr()}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evalsha := func() []slog.Record {
		var out []slog.Record
		for _, rec := range logs.at(slog.LevelWarn) {
			if strings.Contains(rec.Message, "EVALSHA") {
				out = append(out, rec)
			}
		}
		return out
	}
	warned := evalsha()
	if len(warned) != 1 {
		t.Fatalf("warnings of EVALSHA after Open = %d (info records: %v); want 1", len(warned), logs.at(slog.LevelInfo))
	}
	if v, ok := attr(warned[0], "err"); !ok || !strings.Contains(v.String(), "FUNCTION") {
		t.Errorf("the warning's err = %v; want the server's refusal", v)
	}
	if !strings.Contains(warned[0].Message, evalshaCost) {
		t.Errorf("the warning %q does not say what EVALSHA costs (%s)", warned[0].Message, evalshaCost)
	}
	if s.RunsFunctions() {
		t.Error("RunsFunctions = true on a server that refuses FUNCTION")
	}
	roundTrip(t, s)
	if !s.noFunctions.Load() {
		t.Fatal("store did not fall back to EVALSHA")
	}
	if n := len(evalsha()); n != 1 {
		t.Errorf("warnings of EVALSHA after a round trip = %d; want still the one", n)
	}
	// The scripts sent by EVAL are cached under the SHA1s EVALSHA names,
	// so later calls need not send them again.
	for _, sc := range []*script{s.scripts.enqueueLean, s.scripts.claimPlain, s.scripts.completePlain} {
		if out, err := ps.cli("SCRIPT", "EXISTS", sc.sha()); err != nil || strings.TrimSpace(out) != "1" {
			t.Errorf("script %s: SCRIPT EXISTS %s = %q, %v", sc.name, sc.sha(), out, err)
		}
	}
}
