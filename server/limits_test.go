package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/server"
)

// TestLongPollsAreBounded fills the one long-poll slot with an event
// stream: a waiting claim then answers at once, and a second stream is
// refused with 503.
func TestLongPollsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxLongPolls = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("first stream: %d", resp.StatusCode)
	}
	start := time.Now()
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"empty"}, "wait": "30s"})
	if r.status != 200 || time.Since(start) > 10*time.Second {
		t.Fatalf("claim with every slot taken: %d after %s; want an answer at once", r.status, time.Since(start))
	}
	if r := e.req("GET", "/api/v1/events", nil); r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" {
		t.Fatalf("second stream: %d %s; want 503", r.status, r.body)
	}
}

// TestServerRecoversLeases shows the server's own maintenance at work: a
// lease left to expire is recovered without anyone calling for it.
func TestServerRecoversLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // maintenance every 50ms
	id := e.enqueue(map[string]any{"type": "t", "queue": "recover"})
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"recover"}, "lease": "100ms"})
	if r.status != 200 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	var j struct {
		State  string
		Errors []struct{ Kind string }
	}
	waitUntil(t, 10*time.Second, func() bool {
		e.req("GET", "/api/v1/jobs/"+id, nil).decode(t, &j)
		return j.State == "pending"
	})
	if len(j.Errors) != 1 || j.Errors[0].Kind != "lease_expired" {
		t.Fatalf("recovered job's errors: %+v; want one lease_expired attempt", j.Errors)
	}
}

// TestBatchItemLimit: a batch over MaxBatch is 413 and writes nothing; one
// at the limit is written. The default limit holds too.
func TestBatchItemLimit(t *testing.T) {
	t.Parallel()
	batch := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"type":"t","queue":"cap"},`, n), ",") + "]"
	}
	e := newEnv(t, func(c *server.Config) { c.MaxBatch = 5 })
	if r := e.req("POST", "/api/v1/jobs", batch(6)); r.status != http.StatusRequestEntityTooLarge || r.errCode(t) != "payload_too_large" {
		t.Fatalf("batch of 6 over a limit of 5: %d %s; want 413", r.status, r.body)
	}
	if jobs := e.claim("cap", 10); len(jobs) != 0 {
		t.Fatalf("a refused batch wrote %d jobs", len(jobs))
	}
	if r := e.req("POST", "/api/v1/jobs", batch(5)); r.status != http.StatusCreated {
		t.Fatalf("batch of 5 at the limit: %d %s; want 201", r.status, r.body)
	}
	// Commas inside strings and nested values are not items.
	if r := e.req("POST", "/api/v1/jobs", `[{"type":"t","queue":"cap","title":",,,,,,","tags":["a","b","c","d","e","f"],"metadata":{"a":"[","b":"\",,,,,,"}}]`); r.status != http.StatusCreated {
		t.Fatalf("one item with commas inside: %d %s; want 201", r.status, r.body)
	}
	d := newEnv(t, nil)
	if r := d.req("POST", "/api/v1/jobs", batch(server.DefaultMaxBatch+1)); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch of %d under the default limit: %d %.300s; want 413", server.DefaultMaxBatch+1, r.status, r.body)
	}
}

// TestIdempotencyBoundedByBytes: remembered answers are bounded by their
// bytes; the oldest go first, and an answer larger than the whole budget
// is not remembered (its retry runs again).
func TestIdempotencyBoundedByBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.IdempotencyBytes = 800 })
	send := func(key, body string) string {
		r := e.req("POST", "/api/v1/jobs", body, "Idempotency-Key", key)
		if r.status != http.StatusCreated {
			t.Fatalf("enqueue with key %s: %d %s", key, r.status, r.body)
		}
		return string(r.body)
	}
	one := `{"type":"t","queue":"idem"}`
	a := send("a", one)
	if send("a", one) != a {
		t.Fatal("a retry within the bound enqueued again")
	}
	send("b", one)
	send("c", one) // three answers of about 310 bytes each: a goes
	if send("a", one) == a {
		t.Fatal("key a still remembered beyond a bound of 800 bytes")
	}
	big := "[" + strings.TrimSuffix(strings.Repeat(`{"type":"t","queue":"idem"},`, 20), ",") + "]"
	first := send("big", big)
	if send("big", big) == first {
		t.Fatal("an answer larger than the whole bound was remembered")
	}
}

// TestListBoundedInBytes: a page stops once its jobs reach
// MaxResponseBytes, with a cursor right after its last job, so paging
// still returns every job once; a job larger than the bound comes alone.
func TestListBoundedInBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxResponseBytes = 4000 })
	var ids []string
	for i := 0; i < 10; i++ {
		ids = append(ids, e.enqueue(map[string]any{"type": "t", "queue": "page", "title": strings.Repeat("x", 1000)}))
	}
	var got []string
	cursor, pages := "", 0
	for {
		r := e.req("GET", "/api/v1/jobs?queue=page&limit=10&cursor="+cursor, nil)
		var page struct {
			Jobs       []struct{ ID string }
			NextCursor string `json:"next_cursor"`
		}
		r.decode(t, &page)
		if r.status != 200 || len(r.body) > 4000+200 {
			t.Fatalf("page: %d, %d bytes; want 200 within the bound of 4000", r.status, len(r.body))
		}
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		pages++
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(got, ids) || pages < 3 {
		t.Fatalf("paged %d jobs in %d pages; want all 10 once, in order, over several pages", len(got), pages)
	}
	tiny := newEnv(t, func(c *server.Config) { c.MaxResponseBytes = 10 })
	tiny.enqueue(map[string]any{"type": "t", "queue": "page"})
	tiny.enqueue(map[string]any{"type": "t", "queue": "page"})
	var page struct {
		Jobs       []struct{ ID string }
		NextCursor string `json:"next_cursor"`
	}
	tiny.req("GET", "/api/v1/jobs?queue=page", nil).decode(t, &page)
	if len(page.Jobs) != 1 || page.NextCursor == "" {
		t.Fatalf("page under a bound smaller than one job: %d jobs, cursor %q; want the first job alone and a cursor", len(page.Jobs), page.NextCursor)
	}
}

// TestClaimBoundedInBytes: a claim stops once its jobs reach
// MaxResponseBytes and says so; the jobs it had no room for are back in
// their queue at once, their attempt not counted, and later claims get
// them. A job larger than the bound comes alone.
func TestClaimBoundedInBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxResponseBytes = 4000 })
	for i := 0; i < 6; i++ {
		e.enqueue(map[string]any{"type": "t", "queue": "big", "payload": strings.Repeat("y", 1000)})
	}
	type answer struct {
		Jobs []struct {
			ID      string
			Attempt int
		}
		Truncated bool
	}
	var first answer
	r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"big"}, "max": 6})
	r.decode(t, &first)
	if r.status != 200 || len(first.Jobs) == 0 || len(first.Jobs) >= 6 || !first.Truncated || len(r.body) > 4000+200 {
		t.Fatalf("claim of 6 jobs of 1000 bytes under a bound of 4000: %d, %d jobs, truncated %v, %d bytes", r.status, len(first.Jobs), first.Truncated, len(r.body))
	}
	var pending struct{ Jobs []struct{ Attempt int } }
	e.req("GET", "/api/v1/jobs?queue=big&state=pending", nil).decode(t, &pending)
	if len(pending.Jobs) != 6-len(first.Jobs) {
		t.Fatalf("%d jobs pending after a claim that took %d of 6; want the rest handed back", len(pending.Jobs), len(first.Jobs))
	}
	for _, j := range pending.Jobs {
		if j.Attempt != 0 {
			t.Fatalf("a handed-back job has attempt %d; want its attempt not counted", j.Attempt)
		}
	}
	seen := map[string]bool{}
	for _, j := range first.Jobs {
		seen[j.ID] = true
	}
	for len(seen) < 6 {
		var next answer
		e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"big"}, "max": 6}).decode(t, &next)
		if len(next.Jobs) == 0 {
			t.Fatalf("claims got %d of 6 jobs, then none", len(seen))
		}
		for _, j := range next.Jobs {
			if seen[j.ID] || j.Attempt != 1 {
				t.Fatalf("job %s claimed twice or with attempt %d", j.ID, j.Attempt)
			}
			seen[j.ID] = true
		}
	}
	tiny := newEnv(t, func(c *server.Config) { c.MaxResponseBytes = 10 })
	tiny.enqueue(map[string]any{"type": "t", "queue": "big", "payload": strings.Repeat("y", 1000)})
	tiny.enqueue(map[string]any{"type": "t", "queue": "big"})
	var one answer
	tiny.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"big"}, "max": 2}).decode(t, &one)
	if len(one.Jobs) != 1 || !one.Truncated {
		t.Fatalf("claim under a bound smaller than one job: %d jobs, truncated %v; want the first job alone", len(one.Jobs), one.Truncated)
	}
}

// TestClaimStopsAtTheStore: a claim asks the store for no more payload
// bytes than its answer can carry, so the jobs it stops before are never
// claimed (no lease token, no interrupted attempt), rather than claimed
// and handed back; max_bytes bounds a claim further, the first job
// always taken.
func TestClaimStopsAtTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxResponseBytes = 4000 })
	for i := 0; i < 6; i++ {
		e.enqueue(map[string]any{"type": "t", "queue": "big", "payload": strings.Repeat("y", 1000)})
		e.enqueue(map[string]any{"type": "t", "queue": "asked", "payload": strings.Repeat("y", 1000)})
	}
	type answer struct {
		Jobs []struct {
			ID         string
			LeaseToken int64 `json:"lease_token"`
			Errors     []json.RawMessage
		}
		Truncated bool
	}
	untouched := func(queue string, want int) {
		t.Helper()
		var pending answer
		e.req("GET", "/api/v1/jobs?queue="+queue+"&state=pending", nil).decode(t, &pending)
		if len(pending.Jobs) != want {
			t.Fatalf("%d jobs pending in %s; want %d", len(pending.Jobs), queue, want)
		}
		for _, j := range pending.Jobs {
			if j.LeaseToken != 0 || len(j.Errors) != 0 {
				t.Fatalf("job %s left behind has lease token %d and %d attempt errors; want never claimed (0, 0)", j.ID, j.LeaseToken, len(j.Errors))
			}
		}
	}
	var first answer
	e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"big"}, "max": 6}).decode(t, &first)
	if len(first.Jobs) == 0 || len(first.Jobs) >= 6 || !first.Truncated {
		t.Fatalf("claim of 6 jobs of 1000 bytes under a bound of 4000: %d jobs, truncated %v", len(first.Jobs), first.Truncated)
	}
	untouched("big", 6-len(first.Jobs))

	var asked answer
	e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"asked"}, "max": 6, "max_bytes": 1}).decode(t, &asked)
	if len(asked.Jobs) != 1 || !asked.Truncated {
		t.Fatalf("claim with max_bytes 1: %d jobs, truncated %v; want the first job alone, truncated", len(asked.Jobs), asked.Truncated)
	}
	untouched("asked", 5)
	if r := e.req("POST", "/api/v1/claim", map[string]any{"queues": []string{"asked"}, "max_bytes": -1}); r.status != 400 {
		t.Fatalf("claim with max_bytes -1: status %d; want 400", r.status)
	}
}

// TestOpenAPILimitsAgree reads every limit out of the served OpenAPI
// document and sends a request at each (accepted) and one over it
// (refused).
func TestOpenAPILimitsAgree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config) { c.MaxPayload = 64 << 10; c.MaxBatch = 20 })
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage
		}
	}
	e.req("GET", "/api/v1/openapi.json", nil).decode(t, &doc)
	type schema struct {
		MaxLength  int                `json:"maxLength"`
		MaxItems   int                `json:"maxItems"`
		Maximum    int                `json:"maximum"`
		MaxBytes   int                `json:"x-kyu-max-bytes"`
		Items      *schema            `json:"items"`
		Properties map[string]*schema `json:"properties"`
		OneOf      []*schema          `json:"oneOf"`
	}
	read := func(name string) *schema {
		var s schema
		if err := json.Unmarshal(doc.Components.Schemas[name], &s); err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		return &s
	}
	nj := read("NewJob").Properties
	limits := map[string]int{
		"type": nj["type"].MaxLength, "queue": nj["queue"].MaxLength, "title": nj["title"].MaxLength,
		"unique_key": nj["unique_key"].MaxLength, "tags": nj["tags"].MaxItems, "tag": nj["tags"].Items.MaxLength,
		"metadata": nj["metadata"].MaxBytes, "payload": nj["payload_b64"].MaxBytes,
		"batch": read("EnqueueBody").OneOf[1].MaxItems, "claim": read("ClaimRequest").Properties["max"].Maximum,
		"claim_types": read("ClaimRequest").Properties["types"].MaxItems, "claim_type": read("ClaimRequest").Properties["types"].Items.MaxLength,
	}
	for what, n := range limits {
		if n <= 0 {
			t.Fatalf("the document gives no limit for %s", what)
		}
	}
	if limits["payload"] != 64<<10 || limits["batch"] != 20 {
		t.Fatalf("the document's payload and batch limits %d and %d are not the server's configured 65536 and 20", limits["payload"], limits["batch"])
	}
	word := func(n int) string { return strings.Repeat("a", n) }
	tags := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	job := func(field string, v any) map[string]any {
		j := map[string]any{"type": "t", "queue": "limits"}
		j[field] = v
		return j
	}
	cases := []struct {
		name       string
		at, over   any
		path       string
		overStatus int
	}{
		{"type", job("type", word(limits["type"])), job("type", word(limits["type"]+1)), "/api/v1/jobs", 400},
		{"queue", job("queue", word(limits["queue"])), job("queue", word(limits["queue"]+1)), "/api/v1/jobs", 400},
		{"title", job("title", word(limits["title"])), job("title", word(limits["title"]+1)), "/api/v1/jobs", 400},
		{"unique_key", job("unique_key", word(limits["unique_key"])), job("unique_key", word(limits["unique_key"]+1)), "/api/v1/jobs", 400},
		{"tags", job("tags", tags(limits["tags"], limits["tag"])), job("tags", tags(limits["tags"]+1, 1)), "/api/v1/jobs", 400},
		{"tag", job("tags", []string{word(limits["tag"])}), job("tags", []string{word(limits["tag"] + 1)}), "/api/v1/jobs", 400},
		{"metadata", job("metadata", map[string]string{"k": word(limits["metadata"] - 1)}), job("metadata", map[string]string{"k": word(limits["metadata"])}), "/api/v1/jobs", 400},
		{"payload", job("payload_b64", make([]byte, limits["payload"])), job("payload_b64", make([]byte, limits["payload"]+1)), "/api/v1/jobs", 400},
		{"batch", slices.Repeat([]any{job("title", "b")}, limits["batch"]), slices.Repeat([]any{job("title", "b")}, limits["batch"]+1), "/api/v1/jobs", 413},
		{"claim", map[string]any{"queues": []string{"limits"}, "max": limits["claim"]}, map[string]any{"queues": []string{"limits"}, "max": limits["claim"] + 1}, "/api/v1/claim", 400},
		{"claim_types", map[string]any{"queues": []string{"limits"}, "types": tags(limits["claim_types"], 3)}, map[string]any{"queues": []string{"limits"}, "types": tags(limits["claim_types"]+1, 3)}, "/api/v1/claim", 400},
		{"claim_type", map[string]any{"queues": []string{"limits"}, "types": []string{word(limits["claim_type"])}}, map[string]any{"queues": []string{"limits"}, "types": []string{word(limits["claim_type"] + 1)}}, "/api/v1/claim", 400},
	}
	for _, c := range cases {
		if r := e.req("POST", c.path, c.at); r.status >= 300 {
			t.Errorf("%s at the document's limit %d: %d %.300s; want it accepted", c.name, limits[c.name], r.status, r.body)
		}
		if r := e.req("POST", c.path, c.over); r.status != c.overStatus {
			t.Errorf("%s one over the document's limit %d: %d %.300s; want %d", c.name, limits[c.name], r.status, r.body, c.overStatus)
		}
	}
}
