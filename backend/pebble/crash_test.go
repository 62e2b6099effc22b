package pebble

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// crashDirEnv names the store directory of TestCrashChild.
const crashDirEnv = "KYU_PEBBLE_CRASH_DIR"

// TestCrashChild is the child process of TestCrash: it works on the store
// in $KYU_PEBBLE_CRASH_DIR until it is killed, printing one line after
// every acknowledged operation:
//
//	enq ID
//	claim ID TOKEN
//	done ID
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	now := t0
	for {
		now = now.Add(time.Millisecond)
		jobs := make([]backend.NewJob, 5)
		for i := range jobs {
			jobs[i] = backend.NewJob{Type: "t", Payload: []byte("p"), Retention: backend.RetainForever}
		}
		res, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			fmt.Fprintf(out, "enq %s\n", j.ID)
		}
		out.Flush()
		cl, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{backend.DefaultQueue}, Max: 4, Lease: time.Minute, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range cl.Jobs {
			fmt.Fprintf(out, "claim %s %d\n", j.ID, j.LeaseToken)
		}
		out.Flush()
		// Complete all but the last claimed job, which stays active.
		var items []backend.CompleteItem
		for _, j := range cl.Jobs[:max(0, len(cl.Jobs)-1)] {
			items = append(items, backend.CompleteItem{Lease: leaseOf(j)})
		}
		r, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range r.Errors {
			if e == nil {
				fmt.Fprintf(out, "done %s\n", items[i].Lease.JobID)
			}
		}
		out.Flush()
	}
}

// TestCrash kills a child process working on a real directory with
// SIGKILL in mid-stream, reopens the directory and checks that every
// acknowledged operation survived and that no job is stuck.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A child that stalls is killed at a deadline; the test then fails
	// below for having seen too few lines.
	stall := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer stall.Stop()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	enqueued := map[string]bool{}
	claimed := map[string]int64{}
	done := map[string]bool{}
	killed := false
	sc := bufio.NewScanner(stdout)
	lines := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "enq":
			enqueued[f[1]] = true
		case len(f) == 3 && f[0] == "claim":
			tok, _ := strconv.ParseInt(f[2], 10, 64)
			claimed[f[1]] = tok
		case len(f) == 2 && f[0] == "done":
			done[f[1]] = true
		default:
			continue // the test framework's own output
		}
		lines++
		if lines == 3000 && !killed {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child exited after %d lines before it was killed", lines)
	}

	s := openStore(t, dir, Options{})
	ctx := context.Background()
	for id := range enqueued {
		j := get(t, s, id)
		if tok, ok := claimed[id]; ok && j.LeaseToken < tok {
			t.Fatalf("acknowledged claim of %s with token %d lost (token %d)", id, tok, j.LeaseToken)
		}
		if done[id] && j.State != backend.StateCompleted {
			t.Fatalf("acknowledged completion of %s lost: %s", id, j.State)
		}
	}
	// Past every lease, recovery leaves every job completed or claimable.
	later := t0.Add(24 * time.Hour)
	for {
		res, err := s.RecoverLeases(ctx, backend.MaintenanceParams{Now: later})
		if err != nil {
			t.Fatal(err)
		}
		if res.Moved == 0 {
			break
		}
	}
	pending := map[string]bool{}
	for id := range enqueued {
		switch j := get(t, s, id); j.State {
		case backend.StateCompleted:
		case backend.StatePending:
			pending[id] = true
		default:
			t.Fatalf("job %s is %s after recovery; want completed or pending", id, j.State)
		}
	}
	// The store may hold a few more jobs than were acknowledged (written,
	// then killed before the line was printed); every pending one we know
	// must be claimable.
	for _, j := range claim(t, s, later, 2*len(enqueued)) {
		delete(pending, j.ID)
	}
	if len(pending) != 0 {
		t.Fatalf("%d pending jobs were not claimable after recovery", len(pending))
	}
	t.Logf("killed after %d acknowledged operations: %d enqueued, %d claimed, %d completed",
		lines, len(enqueued), len(claimed), len(done))
}
