package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/remote"
)

// TestBrowserWorkerCommandsAndPeriodic quiets and then stops a real worker
// (over HTTP, as one in another process) from the workers page, shows its
// periodic job on the periodic page and the queues' error rates: the job
// the worker runs when told to quiet ends completed, the worker stays up
// until told to stop, then leaves the registry.
func TestBrowserWorkerCommandsAndPeriodic(t *testing.T) {
	b := newBrowser(t, nil)
	rb, err := remote.Open(b.base, remote.Options{Token: b.token})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := kyu.NewMux()
	mux.HandleFunc("hold", func(ctx context.Context, j *kyu.Job) error {
		started <- struct{}{}
		<-release
		return nil
	})
	w, err := kyu.NewWorker(rb, kyu.WorkerConfig{
		Handler: mux, Queues: map[string]int{"cq": 2}, ID: "cmd-worker",
		PollInterval: 100 * time.Millisecond, RegistryInterval: 100 * time.Millisecond,
		DisableMaintenance: true, ShutdownGrace: 5 * time.Second,
		Periodic: []kyu.PeriodicJob{{Name: "nightly-report", Spec: "0 3 * * *", Type: "report", Queue: "reports"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Shutdown(ctx)
		rb.Close()
	})
	id := b.enqueue(map[string]any{"type": "hold", "queue": "cq"})
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not start the job")
	}
	b.enqueue(map[string]any{"type": "x", "queue": "flaky", "max_attempts": 1})
	b.enqueue(map[string]any{"type": "x", "queue": "flaky"})
	b.failJob("flaky", 2)

	b.login()
	b.open("/periodic")
	b.waitFor("the periodic job listed", `document.querySelector('#periodic tr[data-name="nightly-report"]') !== null`)
	if got := eval[string](b, `document.querySelector('#periodic tr[data-name="nightly-report"]').textContent`); !contains(got, "0 3 * * *", "reports", "report", "cmd-worker") {
		t.Errorf("periodic row = %q; want its spec, queue, type and worker", got)
	}
	b.shot("periodic")

	b.open("/queues")
	b.waitFor("the error rates", `document.querySelector('#queues tr[data-queue="flaky"] td.err-5m') !== null`)
	if got := eval[string](b, `document.querySelector('#queues tr[data-queue="flaky"] td.err-5m').textContent + " " + document.querySelector('#queues tr[data-queue="flaky"] td.err-1h').textContent`); got != "100% 100%" {
		t.Errorf("flaky's error rates = %q; want 100%% 100%%", got)
	}

	b.open("/workers")
	b.waitFor("the worker running", `document.querySelector('#workers tr[data-state="running"] button.quiet') !== null`)
	b.do("quiet", chromedp.Click(chromedp.CSS(`#workers button.quiet`)))
	b.waitFor("the confirm dialog", `document.getElementById("confirm").open`)
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitFor("the worker quiet", `document.querySelector('#workers tr[data-state="quiet"]') !== null`)
	b.shot("workers-quiet")
	if s := b.state(id); s != "active" {
		t.Fatalf("the job in flight is %s once the worker is quiet; want still active", s)
	}
	close(release)
	eventuallyState(t, b, id, "completed")
	late := b.enqueue(map[string]any{"type": "hold", "queue": "cq"})

	b.do("stop", chromedp.Click(chromedp.CSS(`#workers button.stop`)))
	b.waitFor("the confirm dialog", `document.getElementById("confirm").open`)
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop on the stop command")
	}
	b.waitFor("the worker gone", `document.getElementById("no-workers") !== null`)
	if s := b.state(late); s != "pending" {
		t.Fatalf("the job enqueued after the quiet is %s; want pending (a quiet worker claims nothing)", s)
	}
}

// eventuallyState waits until the job is in state in the store.
func eventuallyState(t *testing.T, b *browser, id, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.state(id) != state {
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s; want %s", id, b.state(id), state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
