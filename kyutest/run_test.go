package kyutest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/kyutest"
)

func TestRunCapturesReports(t *testing.T) {
	t.Parallel()
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		if err := kyu.Progress(ctx, 50, "half way"); err != nil {
			return err
		}
		if err := kyu.Logf(ctx, "payload %s", j.Payload); err != nil {
			return err
		}
		return j.SetResultJSON(map[string]int{"attempt": j.Attempt})
	})
	start := time.Now()
	out := kyutest.Run(t, h, kyu.JobSpec{Type: "report", Payload: []byte(`{"n":1}`), EnqueueOptions: kyu.EnqueueOptions{Queue: "reports"}})
	t.Logf("Run took %s", time.Since(start))
	if out.Err != nil || out.State != kyu.StateCompleted {
		t.Fatalf("outcome: err %v, state %s; want nil, completed", out.Err, out.State)
	}
	var res struct{ Attempt int }
	if err := out.UnmarshalResult(&res); err != nil || res.Attempt != 1 {
		t.Fatalf("result %s (%v); want attempt 1", out.Result, err)
	}
	if out.Progress == nil || out.Progress.Percent != 50 || out.Progress.Message != "half way" {
		t.Fatalf("progress %+v; want 50%% half way", out.Progress)
	}
	if len(out.Logs) != 1 || out.Logs[0].Line != `payload {"n":1}` {
		t.Fatalf("logs %+v; want the one line", out.Logs)
	}
	if out.Job.Queue != "reports" || out.Job.Type != "report" || out.Job.Attempt != 1 {
		t.Fatalf("job %+v; want type report in queue reports, attempt 1", out.Job)
	}
}

var errBoom = errors.New("boom")

func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		opts  kyu.EnqueueOptions
		err   error
		state kyu.State
	}{
		{"Retry", kyu.EnqueueOptions{}, errBoom, kyu.StateRetry},
		{"RetryAtOnce", kyu.EnqueueOptions{}, kyu.RetryAfter(0, errBoom), kyu.StatePending},
		{"Permanent", kyu.EnqueueOptions{}, kyu.Permanent(errBoom), kyu.StateFailed},
		{"LastAttempt", kyu.EnqueueOptions{MaxAttempts: 1}, errBoom, kyu.StateFailed},
		{"Delayed", kyu.EnqueueOptions{Delay: time.Hour}, nil, kyu.StateCompleted},
		{"RetainNone", kyu.EnqueueOptions{Retention: kyu.RetainNone}, nil, kyu.StateCompleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
				calls.Add(1)
				return c.err
			})
			out := kyutest.Run(t, h, kyu.JobSpec{Type: "t", EnqueueOptions: c.opts})
			if !errors.Is(out.Err, c.err) || (c.err == nil) != (out.Err == nil) {
				t.Fatalf("Err = %v; want %v", out.Err, c.err)
			}
			if out.State != c.state {
				t.Fatalf("State = %s; want %s", out.State, c.state)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("handler called %d times; want once", n)
			}
			if c.err != nil && (len(out.Job.Errors) != 1 || out.Job.Errors[0].Message != "boom") {
				t.Fatalf("job errors %+v; want the attempt's boom", out.Job.Errors)
			}
		})
	}
}

func TestRunPanic(t *testing.T) {
	t.Parallel()
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error { panic("oops") })
	out := kyutest.Run(t, h, kyu.JobSpec{Type: "t"})
	var pe *kyutest.PanicError
	if !errors.As(out.Err, &pe) || pe.Value != "oops" {
		t.Fatalf("Err = %v; want a *PanicError of oops", out.Err)
	}
	if out.State != kyu.StateRetry || len(out.Job.Errors) != 1 || !strings.Contains(out.Job.Errors[0].Stack, "TestRunPanic") {
		t.Fatalf("state %s, errors %+v; want retry with the panic's stack", out.State, out.Job.Errors)
	}
}

func TestRunRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	h := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		t.Error("the handler ran")
		return nil
	})
	for _, c := range []struct {
		spec kyu.JobSpec
		want string
	}{
		{kyu.JobSpec{}, "enqueue"},
		{kyu.JobSpec{Type: "t", EnqueueOptions: kyu.EnqueueOptions{Queue: "no spaces"}}, "enqueue"},
		{kyu.JobSpec{Type: "t", EnqueueOptions: kyu.EnqueueOptions{Deadline: time.Now().Add(-time.Second)}}, "deadline"},
	} {
		msg := fails(t, func(tb testing.TB) { kyutest.Run(tb, h, c.spec) })
		if !strings.Contains(msg, c.want) {
			t.Errorf("Run(%+v) failed with %q; want a failure naming %q", c.spec, msg, c.want)
		}
	}
}
