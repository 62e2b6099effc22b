//go:build unix

package daemon_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/daemon"
)

// TestStopWithJobsInFlight checks a graceful stop: a job that finishes
// within the shutdown timeout completes; one whose child ignores SIGTERM
// is killed after the grace and handed back pending, its attempt unused;
// a job never started stays pending. None is lost, no process is left.
func TestStopWithJobsInFlight(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	quick := bd.script("quick.sh", `echo $$ > "$DIR/quick"; while [ ! -e "$DIR/go" ]; do sleep 0.01; done`)
	hung := bd.script("hung.sh", `trap '' TERM; sleep 60 & echo $! > "$DIR/hung-grandchild"; echo $$ > "$DIR/hung"; wait`)
	env := map[string]string{"DIR": bd.dir}
	r := bd.start(daemon.Config{Concurrency: 2, ShutdownTimeout: 500 * time.Millisecond, KillGrace: 200 * time.Millisecond,
		Handlers: map[string]daemon.HandlerConfig{
			"quick": {Command: []string{quick}, Env: env},
			"hung":  {Command: []string{hung}, Env: env},
		}})
	q := bd.enqueue("quick", `{}`, kyu.EnqueueOptions{})
	h := bd.enqueue("hung", `{}`, kyu.EnqueueOptions{})
	readPID(t, filepath.Join(bd.dir, "quick"))
	hungPID, grandchild := readPID(t, filepath.Join(bd.dir, "hung")), readPID(t, filepath.Join(bd.dir, "hung-grandchild"))
	waiting := bd.enqueue("quick", `{}`, kyu.EnqueueOptions{})

	r.d.Stop()
	// The quick job finishes during the shutdown timeout.
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.wait(t)

	if j, _ := bd.c.Get(t.Context(), q); j.State != kyu.StateCompleted {
		t.Errorf("quick job %s; want completed", j.State)
	}
	jh, _ := bd.c.Get(t.Context(), h)
	if jh.State != kyu.StatePending || jh.Attempt != 0 {
		t.Errorf("hung job %s at attempt %d; want pending, its attempt unused", jh.State, jh.Attempt)
	}
	if alive(hungPID) || alive(grandchild) {
		t.Errorf("hung child or its grandchild outlived the stop")
	}
	if j, _ := bd.c.Get(t.Context(), waiting); j.State != kyu.StatePending && j.State != kyu.StateCompleted {
		t.Errorf("waiting job %s; want pending or completed", j.State)
	}
}

// TestStopNow checks that StopNow ends a graceful stop that waits for a
// long child: the child is killed and its job handed back.
func TestStopNow(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	long := bd.script("long.sh", `echo $$ > "$DIR/long"; sleep 60`)
	r := bd.start(daemon.Config{ShutdownTimeout: time.Hour, KillGrace: 20 * time.Second, Handlers: map[string]daemon.HandlerConfig{
		"long": {Command: []string{long}, Env: map[string]string{"DIR": bd.dir}},
	}})
	id := bd.enqueue("long", `{}`, kyu.EnqueueOptions{})
	pid := readPID(t, filepath.Join(bd.dir, "long"))
	r.d.Stop()
	r.d.StopNow()
	r.wait(t)
	if alive(pid) {
		t.Error("child outlived StopNow")
	}
	if j, _ := bd.c.Get(t.Context(), id); j.State != kyu.StatePending || j.Attempt != 0 {
		t.Errorf("job %s at attempt %d; want pending, attempt unused", j.State, j.Attempt)
	}
}

// TestMaxJobs checks that the daemon stops by itself after MaxJobs jobs,
// handing back the ones it claimed past the count.
func TestMaxJobs(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	var ids []string
	for range 8 {
		ids = append(ids, bd.enqueue("t", `{}`, kyu.EnqueueOptions{}))
	}
	r := bd.start(daemon.Config{Concurrency: 4, MaxJobs: 3, Handlers: map[string]daemon.HandlerConfig{
		"t": {Command: []string{"/bin/true"}},
	}})
	r.wait(t)
	completed, pending := 0, 0
	for _, id := range ids {
		j, err := bd.c.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case j.State == kyu.StateCompleted:
			completed++
		case j.State == kyu.StatePending && j.Attempt == 0:
			pending++
		default:
			t.Errorf("job %s %s at attempt %d", id, j.State, j.Attempt)
		}
	}
	if completed != 3 || pending != 5 {
		t.Errorf("%d completed, %d pending; want 3 and 5", completed, pending)
	}
	if n := r.d.Jobs(); n != 3 {
		t.Errorf("Jobs() = %d; want 3", n)
	}
}

// TestQuietResume checks that a quiet daemon finishes its running job,
// claims nothing more until Resume, then claims again.
func TestQuietResume(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("h.sh", `while [ ! -e "$DIR/go" ]; do sleep 0.01; done`)
	r := bd.start(daemon.Config{RegistryInterval: 20 * time.Millisecond, Handlers: map[string]daemon.HandlerConfig{
		"t": {Command: []string{h}, Env: map[string]string{"DIR": bd.dir}},
	}})
	running := bd.enqueue("t", `{}`, kyu.EnqueueOptions{})
	bd.waitJob(running, "active", func(j *kyu.Job) bool { return j.State == kyu.StateActive })
	r.d.Quiet()
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bd.waitJob(running, "completed while quiet", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	// The quiet daemon, its jobs done, stays listed as quiet: its entry
	// is refreshed after the job's end.
	idle := time.Now()
	quietID := waitQuietListed(t, bd, idle)
	later := bd.enqueue("t", `{}`, kyu.EnqueueOptions{})
	// Several polls (50ms) go by with no claim.
	time.Sleep(300 * time.Millisecond)
	if j, _ := bd.c.Get(t.Context(), later); j.State != kyu.StatePending {
		t.Fatalf("job %s while quiet; want pending", j.State)
	}
	if err := r.d.Resume(); err != nil {
		t.Fatal(err)
	}
	bd.waitJob(later, "completed after resume", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	// The quiet generation's entry gives way to the new one's.
	eventually(t, "only the resumed worker in the registry", func() bool {
		ws, err := bd.c.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].ID != quietID && ws[0].State == backend.WorkerRunning
	})
}

// waitQuietListed waits until the registry lists one worker, quiet, with
// no job running and its entry refreshed after since, and returns its id.
func waitQuietListed(t *testing.T, bd *bundle, since time.Time) string {
	t.Helper()
	var id string
	eventually(t, "the quiet worker listed as quiet after its jobs ended", func() bool {
		ws, err := bd.c.Workers(t.Context())
		if err != nil || len(ws) != 1 {
			return false
		}
		w := ws[0]
		id = w.ID
		return w.State == backend.WorkerQuiet && len(w.Running) == 0 && w.LastSeen.After(since)
	})
	return id
}

// TestReload checks a reload by generation: the old generation's running
// child finishes with the old handler, new jobs run with the new one.
func TestReload(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	old := bd.script("old.sh", `read -r job
case $job in *wait*) while [ ! -e "$DIR/go" ]; do sleep 0.01; done ;; esac
echo '{"result":"old"}' >&3`)
	newer := bd.script("new.sh", `echo '{"result":"new"}' >&3`)
	env := map[string]string{"DIR": bd.dir}
	r := bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{"t": {Command: []string{old}, Env: env}}})
	first := bd.enqueue("t", `"wait"`, kyu.EnqueueOptions{})
	bd.waitJob(first, "active", func(j *kyu.Job) bool { return j.State == kyu.StateActive })

	if err := r.d.Reload(daemon.Config{Handlers: map[string]daemon.HandlerConfig{"t": {}}}); err == nil {
		t.Fatal("Reload took a handler with no command")
	}
	if err := r.d.Reload(daemon.Config{PollInterval: 50 * time.Millisecond, Logger: nil,
		Handlers: map[string]daemon.HandlerConfig{"t": {Command: []string{newer}, Env: env}}}); err != nil {
		t.Fatal(err)
	}
	// A claim the old generation had in flight as it stopped may still
	// bring it a job, which it runs; the jobs after go to the new one.
	for i := 0; ; i++ {
		id := bd.enqueue("t", `{}`, kyu.EnqueueOptions{})
		j := bd.waitJob(id, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
		if string(j.Result) == `"new"` {
			break
		}
		if i == 10 {
			t.Fatalf("10 jobs after the reload ran with the old handler")
		}
	}
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j1 := bd.waitJob(first, "completed by the old generation", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	if string(j1.Result) != `"old"` || j1.Attempt != 1 {
		t.Errorf("old job's result %s at attempt %d; want \"old\" at 1", j1.Result, j1.Attempt)
	}
}

// TestLogState checks that LogState names the running jobs.
func TestLogState(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("h.sh", `while [ ! -e "$DIR/go" ]; do sleep 0.01; done`)
	r := bd.start(daemon.Config{Handlers: map[string]daemon.HandlerConfig{
		"t": {Command: []string{h}, Env: map[string]string{"DIR": bd.dir}},
	}})
	id := bd.enqueue("t", `{}`, kyu.EnqueueOptions{})
	bd.waitJob(id, "active", func(j *kyu.Job) bool { return j.State == kyu.StateActive })
	eventually(t, "LogState shows the job", func() bool {
		r.d.LogState()
		return strings.Contains(bd.log.String(), "running job") && strings.Contains(bd.log.String(), "job_id="+id)
	})
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteCommands checks that a quiet and a stop sent through the API
// (the worker registry) act on the whole daemon: quiet finishes the
// running job and claims no more; stop ends Run.
func TestRemoteCommands(t *testing.T) {
	t.Parallel()
	bd := newBundle(t)
	h := bd.script("h.sh", `while [ ! -e "$DIR/go" ]; do sleep 0.01; done`)
	r := bd.start(daemon.Config{RegistryInterval: 20 * time.Millisecond, Handlers: map[string]daemon.HandlerConfig{
		"t": {Command: []string{h}, Env: map[string]string{"DIR": bd.dir}},
	}})
	running := bd.enqueue("t", `{}`, kyu.EnqueueOptions{})
	bd.waitJob(running, "active", func(j *kyu.Job) bool { return j.State == kyu.StateActive })
	var id string
	eventually(t, "the worker in the registry", func() bool {
		ws, err := bd.c.Workers(t.Context())
		if err != nil || len(ws) != 1 {
			return false
		}
		id = ws[0].ID
		return true
	})
	if _, err := bd.c.QuietWorker(t.Context(), id); err != nil {
		t.Fatalf("QuietWorker: %v", err)
	}
	// The quiet daemon stays listed, as quiet, once its running job is
	// done.
	if err := os.WriteFile(filepath.Join(bd.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bd.waitJob(running, "completed while quiet", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
	quietID := waitQuietListed(t, bd, time.Now())
	if err := r.d.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed worker in the registry", func() bool {
		ws, err := bd.c.Workers(t.Context())
		if err != nil || len(ws) != 1 || ws[0].ID == quietID {
			return false
		}
		id = ws[0].ID
		return true
	})
	if _, err := bd.c.StopWorker(t.Context(), id); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	r.wait(t)
}

// TestJobLogLevel checks the level of the per-job start and finish lines,
// and that off drops them while a failure is still logged.
func TestJobLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   daemon.Config
		start string // the start line's level; "" for none
	}{
		{"default", daemon.Config{}, "INFO"},
		{"warn", daemon.Config{JobLogLevel: slog.LevelWarn}, "WARN"},
		{"off", daemon.Config{JobLogOff: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bd := newBundle(t)
			cfg := tc.cfg
			cfg.Handlers = map[string]daemon.HandlerConfig{
				"ok":  {Shell: "true"},
				"bad": {Shell: "exit 65"},
			}
			bd.start(cfg)
			ok := bd.enqueue("ok", `{}`, kyu.EnqueueOptions{})
			bad := bd.enqueue("bad", `{}`, kyu.EnqueueOptions{})
			bd.waitJob(ok, "completed", func(j *kyu.Job) bool { return j.State == kyu.StateCompleted })
			bd.waitJob(bad, "failed", func(j *kyu.Job) bool { return j.State == kyu.StateFailed })
			log := bd.log.String()
			for _, line := range []string{`msg="job started" job_id=` + ok, `msg="job finished" job_id=` + ok} {
				got := ""
				for l := range strings.SplitSeq(log, "\n") {
					if strings.Contains(l, line) {
						_, rest, _ := strings.Cut(l, "level=")
						got, _, _ = strings.Cut(rest, " ")
					}
				}
				if got != tc.start {
					t.Errorf("%s logged at %q; want %q", line, got, tc.start)
				}
			}
			if !strings.Contains(log, `level=ERROR msg="job failed" job_id=`+bad) {
				t.Errorf("the failure is not logged at ERROR:\n%s", log)
			}
		})
	}
}
