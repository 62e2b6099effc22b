package kyutest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/kyutest"
)

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	c := kyu.NewClient(store, kyu.ClientConfig{})
	for _, s := range []kyu.JobSpec{
		{Type: "email.send", Payload: []byte(`{"to":"ada"}`), EnqueueOptions: kyu.EnqueueOptions{Queue: "mail"}},
		{Type: "email.send", Payload: []byte(`{"to":"bob"}`), EnqueueOptions: kyu.EnqueueOptions{Queue: "mail"}},
		{Type: "report.build"},
	} {
		if _, err := c.EnqueueMany(t.Context(), []kyu.JobSpec{s}); err != nil {
			t.Fatal(err)
		}
	}
	to := func(name string) func([]byte) bool {
		return func(p []byte) bool { return bytes.Contains(p, []byte(`"to":"`+name+`"`)) }
	}

	j := kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "email.send", Queue: "mail", Payload: to("bob")})
	if string(j.Payload) != `{"to":"bob"}` {
		t.Fatalf("RequireEnqueued returned the job with payload %s; want bob's", j.Payload)
	}
	if j := kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "email.send"}); string(j.Payload) != `{"to":"ada"}` {
		t.Fatalf("RequireEnqueued returned %s; want the oldest match, ada's", j.Payload)
	}
	kyutest.RequireEnqueued(t, store, kyutest.Want{Type: "report.build", Queue: "default", State: kyu.StatePending})
	if js := kyutest.RequireEnqueuedN(t, store, kyutest.Want{Queue: "mail"}, 2); len(js) != 2 {
		t.Fatalf("RequireEnqueuedN returned %d jobs; want 2", len(js))
	}
	kyutest.RequireNotEnqueued(t, store, kyutest.Want{Type: "email.send", Payload: to("eve")})
	kyutest.RequireNotEnqueued(t, store, kyutest.Want{Type: "report.build", Queue: "mail"})

	failures := []struct {
		name string
		fn   func(tb testing.TB)
		want []string
	}{
		{"NoSuchPayload", func(tb testing.TB) {
			kyutest.RequireEnqueued(tb, store, kyutest.Want{Type: "email.send", Payload: to("eve")})
		}, []string{`no job with type "email.send", a payload the predicate accepts was enqueued`, `type "report.build", queue "default", pending`}},
		{"NoSuchState", func(tb testing.TB) {
			kyutest.RequireEnqueued(tb, store, kyutest.Want{Type: "report.build", State: kyu.StateCompleted})
		}, []string{"state completed"}},
		{"Count", func(tb testing.TB) {
			kyutest.RequireEnqueuedN(tb, store, kyutest.Want{Type: "email.send"}, 1)
		}, []string{`2 jobs with type "email.send" were enqueued; want 1`}},
		{"NotEnqueued", func(tb testing.TB) {
			kyutest.RequireNotEnqueued(tb, store, kyutest.Want{Type: "email.send", Payload: to("ada")})
		}, []string{"1 jobs with", `payload "{\"to\":\"ada\"}"`}},
	}
	for _, f := range failures {
		msg := fails(t, f.fn)
		for _, w := range f.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: failed with %q; want it to say %q", f.name, msg, w)
			}
		}
	}
}

func TestRequireEnqueuedEmptyStore(t *testing.T) {
	t.Parallel()
	store := memory.New()
	defer store.Close()
	msg := fails(t, func(tb testing.TB) { kyutest.RequireEnqueued(tb, store, kyutest.Want{}) })
	if !strings.Contains(msg, "no job was enqueued; the store holds no job") {
		t.Fatalf("failed with %q; want it to say the store is empty", msg)
	}
}
