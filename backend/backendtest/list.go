package backendtest

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// list reads one page and fails the test on error.
func (f *fixture) list(p backend.ListParams) backend.ListResult {
	f.t.Helper()
	res, err := f.b.List(f.ctx, p)
	if err != nil {
		f.t.Fatalf("List(%+v): %v", p, err)
	}
	if limit := cmp.Or(p.Limit, backend.DefaultListLimit); len(res.Jobs) > limit {
		f.t.Fatalf("List(limit %d) returned %d jobs", limit, len(res.Jobs))
	}
	return res
}

// listIDs pages through p from the first page to the last, calling between
// (if not nil) after each page, and returns the ids in the order listed;
// a job listed twice fails the test.
func (f *fixture) listIDs(p backend.ListParams, between func()) []string {
	f.t.Helper()
	var out []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			f.t.Fatal("List kept returning cursors after 10000 pages")
		}
		res := f.list(p)
		for _, j := range res.Jobs {
			if seen[j.ID] {
				f.t.Fatalf("List returned %s twice (page %d)", j.ID, pages+1)
			}
			seen[j.ID] = true
			out = append(out, j.ID)
		}
		if res.NextCursor == "" {
			return out
		}
		p.Cursor = res.NextCursor
		if between != nil {
			between()
		}
	}
}

// wantIDs fails the test unless got is want, in order.
func (f *fixture) wantIDs(what string, got, want []string) {
	f.t.Helper()
	if !slices.Equal(got, want) {
		f.t.Fatalf("%s listed %d jobs %v; want %d jobs %v", what, len(got), got, len(want), want)
	}
}

func testList(t *testing.T, factory Factory) {
	t.Run("Filters", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		completed := f.finish(backend.RetainForever, backend.StateCompleted)
		failed := f.finish(backend.RetainForever, backend.StateFailed)
		cancelled := f.finish(backend.RetainForever, backend.StateCancelled)
		retry := f.waiting(backend.StateRetry, backend.NewJob{Type: "mail.send", Title: "an invoice reminder"})
		active := f.enqueueOne(backend.NewJob{Title: "resize"})
		f.claimID(active, "the only pending job")
		pending := f.enqueueOne(backend.NewJob{Title: "Monthly INVOICE #12", Tags: []string{"billing", "vip"}})
		scheduled := f.enqueueOne(backend.NewJob{RunAt: f.now.Add(time.Hour), Type: "mail.send", Tags: []string{"vipx"}})
		elsewhere := f.enqueueOne(backend.NewJob{Queue: other, Title: "invoice", Tags: []string{"vip"}})
		mine := []string{completed, failed, cancelled, retry, active, pending, scheduled}

		f.wantIDs("List(queue)", f.listIDs(backend.ListParams{Queue: f.queue}, nil), mine)
		f.wantIDs("List()", f.listIDs(backend.ListParams{}, nil), append(slices.Clone(mine), elsewhere))
		for s, id := range map[backend.State]string{
			backend.StatePending: pending, backend.StateScheduled: scheduled, backend.StateActive: active,
			backend.StateCompleted: completed, backend.StateFailed: failed, backend.StateCancelled: cancelled, backend.StateRetry: retry,
		} {
			f.wantIDs("List(state "+string(s)+")", f.listIDs(backend.ListParams{Queue: f.queue, State: s}, nil), []string{id})
		}
		f.wantIDs("List(state pending), every queue", f.listIDs(backend.ListParams{State: backend.StatePending}, nil), []string{pending, elsewhere})
		f.wantIDs("List(type)", f.listIDs(backend.ListParams{Type: "mail.send"}, nil), []string{retry, scheduled})
		f.wantIDs("List(type, state)", f.listIDs(backend.ListParams{Type: "mail.send", State: backend.StateRetry}, nil), []string{retry})
		f.wantIDs("List(search id)", f.listIDs(backend.ListParams{Search: failed}, nil), []string{failed})
		f.wantIDs("List(search title, any case)", f.listIDs(backend.ListParams{Search: "InVoIcE"}, nil), []string{retry, pending, elsewhere})
		f.wantIDs("List(search title, queue)", f.listIDs(backend.ListParams{Search: "invoice", Queue: f.queue}, nil), []string{retry, pending})
		f.wantIDs("List(search tag, exact)", f.listIDs(backend.ListParams{Search: "vip"}, nil), []string{pending, elsewhere})
		f.wantIDs("List(search nothing)", f.listIDs(backend.ListParams{Search: "no such thing"}, nil), nil)
		f.wantIDs("List(queue nobody used)", f.listIDs(backend.ListParams{Queue: uniqueQueue(t, "-never")}, nil), nil)
	})

	t.Run("Tag", func(t *testing.T) {
		f := start(t, factory)
		other := uniqueQueue(t, "-other")
		var red []string
		for range 7 {
			red = append(red, f.enqueueOne(backend.NewJob{Title: "red", Tags: []string{"blue", "red"}}))
			f.enqueueOne(backend.NewJob{Title: "red", Tags: []string{"Red", "reds", "re"}})
			f.enqueueOne(backend.NewJob{Title: "no tags"})
		}
		f.claimID(red[0], "the first pending job")
		cancelled := f.enqueueOne(backend.NewJob{Tags: []string{"red"}})
		_, err := f.cancel(cancelled)
		f.mustOK("Cancel", err)
		elsewhere := f.enqueueOne(backend.NewJob{Queue: other, Tags: []string{"red"}})
		mine := append(slices.Clone(red), cancelled)
		newest := slices.Clone(mine)
		slices.Reverse(newest)

		f.wantIDs("List(tag, queue)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "red"}, nil), mine)
		f.wantIDs("List(tag, queue, limit 2)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "red", Limit: 2}, nil), mine)
		f.wantIDs("List(tag, queue, newest first, limit 3)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "red", Limit: 3, Order: backend.NewestFirst}, nil), newest)
		f.wantIDs("List(tag), every queue", f.listIDs(backend.ListParams{Tag: "red", Limit: 2}, nil), append(slices.Clone(mine), elsewhere))
		f.wantIDs("List(tag, queue, state pending)", f.listIDs(backend.ListParams{Queue: f.queue, State: backend.StatePending, Tag: "red", Limit: 2}, nil), red[1:])
		f.wantIDs("List(tag, state cancelled)", f.listIDs(backend.ListParams{State: backend.StateCancelled, Tag: "red"}, nil), []string{cancelled})
		f.wantIDs("List(tag, type)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "red", Type: "no.such.type"}, nil), nil)
		f.wantIDs("List(tag, search)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "blue", Search: red[4]}, nil), red[4:5])
		f.wantIDs("List(tag nobody has)", f.listIDs(backend.ListParams{Queue: f.queue, Tag: "RED"}, nil), nil)

		res := f.list(backend.ListParams{Queue: f.queue, Tag: "red", Limit: 2})
		q := backend.ListParams{Queue: f.queue, Tag: "blue", Limit: 2, Cursor: res.NextCursor}
		_, err = f.b.List(f.ctx, q)
		wantInvalid(t, err, -1, "cursor")
	})

	t.Run("Fields", func(t *testing.T) {
		f := start(t, factory)
		id := f.enqueueOne(backend.NewJob{Payload: []byte("payload"), Title: "t", Tags: []string{"a"}, Metadata: map[string]string{"k": "v"}, Retention: backend.RetainForever})
		j := f.claimOne()
		f.mustOK("Report", f.report(backend.ReportItem{Lease: lease(j), Progress: &backend.Progress{Percent: 50}, Logs: []string{"line"}}, 0))
		f.mustOK("Fail", f.fail(backend.FailItem{Lease: lease(j), Message: "boom", RetryAt: f.now}))
		j = f.claimOne()
		f.mustOK("Complete", f.complete(lease(j), []byte("result")))
		res := f.list(backend.ListParams{Queue: f.queue})
		if len(res.Jobs) != 1 || res.NextCursor != "" {
			t.Fatalf("List of one job returned %d jobs, cursor %q; want 1, none", len(res.Jobs), res.NextCursor)
		}
		listed := res.Jobs[0]
		if len(listed.Payload) != 0 || len(listed.Result) != 0 || len(listed.Logs) != 0 {
			t.Fatalf("listed job carries Payload %q, Result %q, %d log lines; want none (Get has them)", listed.Payload, listed.Result, len(listed.Logs))
		}
		want := f.get(id)
		want.Payload, want.Result, want.Logs = nil, nil, nil
		if d := diffJobs(want, listed); len(d) > 0 {
			t.Fatalf("listed job differs from Get (without Payload, Result, Logs):\n\t%s", strings.Join(d, "\n\t"))
		}
	})

	t.Run("Order", func(t *testing.T) {
		f := start(t, factory)
		var want []string
		for i := range 7 {
			// Later jobs run earlier and rank higher: List orders by id alone.
			want = append(want, f.enqueueOne(backend.NewJob{Priority: i, RunAt: f.now.Add(time.Duration(7-i) * time.Minute)}))
			if i%2 == 0 {
				f.advance(time.Millisecond)
			}
		}
		f.wantIDs("List(oldest)", f.listIDs(backend.ListParams{Order: backend.OldestFirst, Limit: 3}, nil), want)
		f.wantIDs("List(default order)", f.listIDs(backend.ListParams{Limit: 2}, nil), want)
		slices.Reverse(want)
		f.wantIDs("List(newest)", f.listIDs(backend.ListParams{Order: backend.NewestFirst, Limit: 3}, nil), want)
	})

	t.Run("Limits", func(t *testing.T) {
		f := start(t, factory)
		f.wantIDs("List of an empty store", f.listIDs(backend.ListParams{}, nil), nil)
		if res := f.list(backend.ListParams{}); len(res.Jobs) != 0 || res.NextCursor != "" {
			t.Fatalf("List of an empty store = %d jobs, cursor %q; want none", len(res.Jobs), res.NextCursor)
		}
		batch := make([]backend.NewJob, backend.MaxListLimit+1)
		var all []string
		for _, r := range f.enqueue(batch...) {
			all = append(all, r.ID)
		}
		res := f.list(backend.ListParams{})
		if len(res.Jobs) != backend.DefaultListLimit || res.NextCursor == "" {
			t.Fatalf("List without a limit returned %d jobs (cursor %q); want the default %d and a cursor", len(res.Jobs), res.NextCursor, backend.DefaultListLimit)
		}
		res = f.list(backend.ListParams{Limit: backend.MaxListLimit})
		if len(res.Jobs) != backend.MaxListLimit || res.NextCursor == "" {
			t.Fatalf("List(limit %d) of %d jobs returned %d (cursor %q); want %d and a cursor", backend.MaxListLimit, len(all), len(res.Jobs), res.NextCursor, backend.MaxListLimit)
		}
		last := f.list(backend.ListParams{Limit: backend.MaxListLimit, Cursor: res.NextCursor})
		if len(last.Jobs) != 1 || last.Jobs[0].ID != all[len(all)-1] || last.NextCursor != "" {
			t.Fatalf("last page = %v, cursor %q; want [%s] and no cursor", ids(last.Jobs), last.NextCursor, all[len(all)-1])
		}
		// A page that ends exactly with the last job is the last page.
		p := backend.ListParams{Limit: 7}
		for page := 1; ; page++ {
			r := f.list(p)
			if page < 143 && (len(r.Jobs) != 7 || r.NextCursor == "") {
				t.Fatalf("page %d of 1001 jobs by 7 = %d jobs, cursor %q; want 7 and a cursor", page, len(r.Jobs), r.NextCursor)
			}
			if page == 143 {
				if len(r.Jobs) != 7 || r.NextCursor != "" {
					t.Fatalf("page 143 of 1001 jobs by 7 = %d jobs, cursor %q; want the last 7 and no cursor", len(r.Jobs), r.NextCursor)
				}
				break
			}
			p.Cursor = r.NextCursor
		}
		// The limit may change from page to page; the cursor holds.
		first := f.list(backend.ListParams{Limit: 3})
		next := f.list(backend.ListParams{Limit: 5, Cursor: first.NextCursor})
		f.wantIDs("two pages of different limits", append(ids(first.Jobs), ids(next.Jobs)...), all[:8])
	})

	t.Run("PagingWhileEnqueueing", func(t *testing.T) {
		for _, order := range []backend.ListOrder{backend.OldestFirst, backend.NewestFirst} {
			t.Run(string(order), func(t *testing.T) {
				f := start(t, factory)
				other := uniqueQueue(t, "-other")
				var want []string
				for range 4 {
					for _, r := range f.enqueue(make([]backend.NewJob, 10)...) {
						want = append(want, r.ID)
					}
					f.advance(time.Millisecond)
				}
				// A producer adds jobs to the listed queue and to another one
				// while the listing runs (a bounded number, so that an
				// oldest-first listing reaches its end).
				var (
					wg   sync.WaitGroup
					stop = make(chan struct{})
					now  = f.now
				)
				halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
				defer halt() // also when the listing fails the test
				wg.Go(func() {
					for i := range 100 {
						select {
						case <-stop:
							return
						default:
						}
						q := f.queue
						if i%2 == 1 {
							q = other
						}
						_, err := f.b.Enqueue(f.ctx, backend.EnqueueParams{Jobs: []backend.NewJob{{Type: testType, Queue: q}}, Now: now.Add(time.Duration(i) * time.Millisecond)})
						if err != nil {
							t.Errorf("concurrent Enqueue: %v", err)
							return
						}
					}
				})
				between := func() {
					// And one arrives between pages for certain.
					f.advance(time.Millisecond)
					f.enqueueN(1)
				}
				got := f.listIDs(backend.ListParams{Queue: f.queue, Order: order, Limit: 3}, between)
				halt()
				if order == backend.NewestFirst {
					slices.Reverse(want)
					if len(got) < len(want) {
						t.Fatalf("newest-first paging listed %d jobs; want at least the %d that were there", len(got), len(want))
					}
					// Jobs added meanwhile may lead the first page; the rest follow.
					got = got[len(got)-len(want):]
					f.wantIDs("newest-first paging while enqueueing (jobs there throughout)", got, want)
					return
				}
				if len(got) < len(want) {
					t.Fatalf("oldest-first paging listed %d jobs; want at least the %d that were there", len(got), len(want))
				}
				f.wantIDs("oldest-first paging while enqueueing (jobs there throughout)", got[:len(want)], want)
			})
		}
	})

	t.Run("Cursor", func(t *testing.T) {
		f := start(t, factory)
		f.enqueueN(5)
		p := backend.ListParams{Queue: f.queue, State: backend.StatePending, Type: testType, Search: "", Order: backend.OldestFirst, Limit: 2}
		cursor := f.list(p).NextCursor
		if cursor == "" {
			t.Fatal("List(limit 2) of 5 jobs returned no cursor")
		}
		tampered := []string{
			string(cursor[0]^1) + cursor[1:],
			cursor[:len(cursor)-2],
			cursor + "AAAA",
			"!!not base64!!",
			"AA",
		}
		for _, c := range tampered {
			q := p
			q.Cursor = c
			_, err := f.b.List(f.ctx, q)
			wantInvalid(t, err, -1, "cursor")
		}
		for name, change := range map[string]func(q *backend.ListParams){
			"queue":  func(q *backend.ListParams) { q.Queue = uniqueQueue(t, "-other") },
			"all":    func(q *backend.ListParams) { q.Queue = "" },
			"state":  func(q *backend.ListParams) { q.State = backend.StateScheduled },
			"type":   func(q *backend.ListParams) { q.Type = "other.type" },
			"tag":    func(q *backend.ListParams) { q.Tag = "other-tag" },
			"search": func(q *backend.ListParams) { q.Search = "x" },
			"order":  func(q *backend.ListParams) { q.Order = backend.NewestFirst },
		} {
			q := p
			q.Cursor = cursor
			change(&q)
			_, err := f.b.List(f.ctx, q)
			if err == nil {
				t.Fatalf("List with a cursor of other filters (%s changed) succeeded; want a ValidationError on cursor", name)
			}
			wantInvalid(t, err, -1, "cursor")
		}
		q := p
		q.Cursor = cursor
		if got := f.list(q); len(got.Jobs) != 2 {
			t.Fatalf("the untouched cursor gave %d jobs; want 2", len(got.Jobs))
		}
	})

	t.Run("Checks", func(t *testing.T) {
		f := start(t, factory)
		for _, c := range []struct {
			field string
			p     backend.ListParams
		}{
			{"queue", backend.ListParams{Queue: "no spaces"}},
			{"state", backend.ListParams{State: "bogus"}},
			{"order", backend.ListParams{Order: "sideways"}},
			{"limit", backend.ListParams{Limit: -1}},
			{"limit", backend.ListParams{Limit: backend.MaxListLimit + 1}},
			{"search", backend.ListParams{Search: strings.Repeat("s", 257)}},
			{"tag", backend.ListParams{Tag: strings.Repeat("t", backend.MaxTag+1)}},
			{"tag", backend.ListParams{Tag: "bad\xff"}},
			{"tag", backend.ListParams{Tag: "nul\x00"}},
		} {
			_, err := f.b.List(f.ctx, c.p)
			wantInvalid(t, err, -1, c.field)
		}
	})
}
