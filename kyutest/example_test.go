package kyutest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/kyutest"
)

// Run one attempt of a handler and look at everything it reported.
func ExampleRun() {
	t := exampleT{} // in a test: the test's *testing.T

	// resize is the handler under test.
	resize := kyu.HandlerFunc(func(ctx context.Context, j *kyu.Job) error {
		var p struct{ Width int }
		if err := j.UnmarshalPayload(&p); err != nil {
			return kyu.Permanent(err)
		}
		if err := kyu.Progress(ctx, 50, "decoded"); err != nil {
			return err
		}
		if err := kyu.Logf(ctx, "resizing to %d px", p.Width); err != nil {
			return err
		}
		return j.SetResultJSON(map[string]int{"width": p.Width})
	})

	out := kyutest.Run(t, resize, kyu.JobSpec{Type: "image.resize", Payload: []byte(`{"Width":640}`)})
	fmt.Println("err:", out.Err)
	fmt.Println("state:", out.State)
	fmt.Println("result:", string(out.Result))
	fmt.Println("progress:", out.Progress.Percent, out.Progress.Message)
	for _, l := range out.Logs {
		fmt.Println("log:", l.Line)
	}

	// A payload that does not decode fails the job for good.
	out = kyutest.Run(t, resize, kyu.JobSpec{Type: "image.resize", Payload: []byte(`"big"`)})
	fmt.Println("permanent:", kyu.IsPermanent(out.Err), out.State)
	// Output:
	// err: <nil>
	// state: completed
	// result: {"width":640}
	// progress: 50 decoded
	// log: resizing to 640 px
	// permanent: true failed
}

// Check that the code under test enqueued the job it should have.
func ExampleRequireEnqueued() {
	t := exampleT{} // in a test: the test's *testing.T
	store := memory.New()
	defer store.Close()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	// signUp is the code under test: it enqueues a welcome mail.
	signUp := func(ctx context.Context, email string) error {
		_, err := client.EnqueueJSON(ctx, "mail.welcome", map[string]string{"to": email}, kyu.EnqueueOptions{Queue: "mail"})
		return err
	}
	if err := signUp(context.Background(), "ada@example.com"); err != nil {
		t.Fatalf("signUp: %v", err)
	}

	j := kyutest.RequireEnqueued(t, store, kyutest.Want{
		Type:  "mail.welcome",
		Queue: "mail",
		Payload: func(p []byte) bool {
			var m struct{ To string }
			return json.Unmarshal(p, &m) == nil && m.To == "ada@example.com"
		},
	})
	fmt.Println(j.Type, j.Queue, j.State, string(j.Payload))
	kyutest.RequireNotEnqueued(t, store, kyutest.Want{Type: "mail.welcome", Payload: func(p []byte) bool {
		return bytes.Contains(p, []byte("bob@"))
	}})
	// Output:
	// mail.welcome mail pending {"to":"ada@example.com"}
}

// Run a queue's jobs, and the jobs they enqueue, until nothing is left to
// do.
func ExampleDrain() {
	t := exampleT{} // in a test: the test's *testing.T
	store := memory.New()
	defer store.Close()
	client := kyu.NewClient(store, kyu.ClientConfig{})

	// An order's job enqueues its invoice's.
	mux := kyu.NewMux()
	mux.HandleFunc("order.placed", func(ctx context.Context, j *kyu.Job) error {
		_, err := client.Enqueue(ctx, "invoice.send", j.Payload, kyu.EnqueueOptions{})
		return err
	})
	mux.HandleFunc("invoice.send", func(ctx context.Context, j *kyu.Job) error {
		j.SetResult([]byte("sent"))
		return nil
	})

	ctx := context.Background()
	for _, order := range []string{"1001", "1002"} {
		if _, err := client.Enqueue(ctx, "order.placed", []byte(order), kyu.EnqueueOptions{}); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	res := kyutest.Drain(ctx, t, store, mux)
	fmt.Println("processed:", res.Processed, "errors:", len(res.Errors))
	for _, j := range kyutest.RequireEnqueuedN(t, store, kyutest.Want{Type: "invoice.send", State: kyu.StateCompleted}, 2) {
		fmt.Println("invoice", string(j.Payload), string(j.Result))
	}
	// Output:
	// processed: 4 errors: 0
	// invoice 1001 sent
	// invoice 1002 sent
}

// exampleT stands in for the *testing.T these examples have none of: a
// failure panics.
type exampleT struct{ testing.TB }

func (exampleT) Helper()                           {}
func (exampleT) Context() context.Context          { return context.Background() }
func (exampleT) Output() io.Writer                 { return io.Discard }
func (exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
