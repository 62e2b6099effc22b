package remote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

// TestClientAndWorkerOverHTTP runs a Client and a Worker through the remote
// backend against a real server over the embedded store: the job is
// enqueued, processed and completed with its result.
func TestClientAndWorkerOverHTTP(t *testing.T) {
	t.Parallel()
	url := startServer(t, nil)
	b := openRemote(t, url)
	client := kyu.NewClient(b, kyu.ClientConfig{})

	worker, err := kyu.NewWorker(b, kyu.WorkerConfig{
		Queues: map[string]int{"mail": 2},
		Handler: kyu.HandlerFunc(func(ctx context.Context, job *kyu.Job) error {
			var in struct{ To string }
			if err := job.UnmarshalPayload(&in); err != nil {
				return err
			}
			return job.SetResultJSON(map[string]string{"sent_to": in.To})
		}),
		DisableMaintenance: true, // the server runs maintenance
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := worker.Shutdown(ctx); err != nil {
			t.Errorf("worker Shutdown: %v", err)
		}
	})

	res, err := client.EnqueueJSON(t.Context(), "email.send", map[string]string{"to": "ada@example.com"}, kyu.EnqueueOptions{Queue: "mail"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		job, err := client.Get(t.Context(), res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if job.State == kyu.StateCompleted {
			var out map[string]string
			if err := json.Unmarshal(job.Result, &out); err != nil || out["sent_to"] != "ada@example.com" {
				t.Fatalf("completed with result %s (%v); want sent_to ada@example.com", job.Result, err)
			}
			return
		}
		if job.State.Final() || time.Now().After(deadline) {
			t.Fatalf("job is %s; want completed within 20s", job.State)
		}
		// Wait on the server's long-poll rather than a sleep.
		waitFinished(t, url, res.ID)
	}
}

// waitFinished long-polls the server until the job is finished, for at
// most 2 seconds.
func waitFinished(t *testing.T, url, id string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/api/v1/jobs/"+id+"/wait?timeout=2s", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer remote-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("wait: HTTP %d", resp.StatusCode)
	}
}
