package redis

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	good := []struct {
		raw  string
		want func(o Options) bool
	}{
		{"redis://127.0.0.1:6379/2?prefix=app", func(o Options) bool {
			return o.Addrs[0] == "127.0.0.1:6379" && o.DB == 2 && o.Prefix == "app" && !o.Cluster
		}},
		{"redis://:pw@h", func(o Options) bool { return o.Addrs[0] == "h:6379" && o.Password == "pw" && o.Username == "" }},
		{"redis://user:pw@h:1", func(o Options) bool { return o.Username == "user" && o.Password == "pw" }},
		{"rediss://h", func(o Options) bool { return o.TLS != nil && o.TLS.ServerName == "h" }},
		{"redis-cluster://a:7000,b:7001?addr=c:7002", func(o Options) bool {
			return o.Cluster && strings.Join(o.Addrs, " ") == "a:7000 b:7001 c:7002"
		}},
		{"redis-sentinel://s1,s2:5000/1?master=mymaster", func(o Options) bool {
			return o.SentinelMaster == "mymaster" && strings.Join(o.Addrs, " ") == "s1:26379 s2:5000" && o.DB == 1
		}},
	}
	for _, c := range good {
		o, err := ParseURL(c.raw)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.raw, err)
			continue
		}
		if !c.want(o) {
			t.Errorf("ParseURL(%q) = %+v", c.raw, o)
		}
	}
	for _, raw := range []string{
		"redis://:pw@h/x", "redis://:pw@h:99999", "http://:pw@h", "redis://:pw@h?prefix=a:b", "redis://:pw@h?prefix=",
		"redis-sentinel://:pw@h", "redis-cluster://:pw@h/3", "redis://:pw@h?bogus=1", "redis://:pw@%zz", "redis://:pw@",
	} {
		_, err := ParseURL(raw)
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrBadURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("ParseURL(%q) error repeats the password: %v", raw, err)
		}
	}
}

func TestOpenWrongPassword(t *testing.T) {
	t.Parallel()
	ps := startServer(t, "--requirepass", "right-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pw := range []string{"", "wrong-secret"} {
		_, err := Open(ctx, Options{Addrs: []string{ps.addr()}, Password: pw, RetryFor: time.Second})
		if err == nil {
			t.Fatalf("Open with password %q succeeded", pw)
		}
		if !strings.Contains(err.Error(), "authentication") {
			t.Errorf("Open with password %q: %v, want it to say authentication failed", pw, err)
		}
		if pw != "" && strings.Contains(err.Error(), pw) {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}, Password: "right-secret"})
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	s.Close()
}

func TestOpenNotRedis(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Open(ctx, Options{Addrs: []string{l.Addr().String()}, RetryFor: time.Second, DialTimeout: time.Second})
	if err == nil {
		t.Fatal("Open on an HTTP server succeeded")
	}
	if !strings.Contains(err.Error(), "Redis") {
		t.Errorf("Open on an HTTP server: %v, want it to ask whether this is Redis", err)
	}
}

func TestOpenPrefixInUse(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	meta := s.keys.meta()
	o := s.opts
	reopen := func() error {
		s2, err := Open(ctx, Options{Addrs: o.Addrs, DB: o.DB, Username: o.Username, Password: o.Password, Prefix: o.Prefix, RetryFor: time.Second})
		if err == nil {
			s2.Close()
		}
		return err
	}
	if err := reopen(); err != nil {
		t.Fatalf("reopening a kyu prefix: %v", err)
	}
	c := s.client
	cases := []struct {
		setup func() error
		want  error
	}{
		{func() error {
			return c.Do(ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("kyu", "99").Build()).Error()
		}, ErrNewerFormat},
		{func() error {
			return c.Do(ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("kyu", "1").Build()).Error()
		}, ErrOlderFormat},
		{func() error {
			return c.Do(ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("kyu", "one").Build()).Error()
		}, ErrPrefixInUse},
		{func() error {
			return c.Do(ctx, c.B().Hset().Key(meta).FieldValue().FieldValue("owner", "another program").Build()).Error()
		}, ErrPrefixInUse},
		{func() error {
			c.Do(ctx, c.B().Del().Key(meta).Build())
			return c.Do(ctx, c.B().Set().Key(meta).Value("someone else's").Build()).Error()
		}, ErrPrefixInUse},
	}
	for i, tc := range cases {
		c.Do(ctx, c.B().Del().Key(meta).Build())
		if err := tc.setup(); err != nil {
			t.Fatal(err)
		}
		if err := reopen(); !errors.Is(err, tc.want) {
			t.Errorf("case %d: Open = %v, want %v", i, err, tc.want)
		}
	}
}

// TestCorruptRecord edits a stored job into nonsense: Get, Cancel and
// Retry report it as corrupt, and List and Claim skip it, handing out the
// good job behind it.
func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
		{Type: "t", Queue: "q", Priority: 5}, {Type: "t", Queue: "q", Priority: 5}, {Type: "t", Queue: "q", Priority: 5}, {Type: "t", Queue: "q"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	jobsKey := s.keys.queue(num).jobs()
	c := s.client
	orig, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(res.Jobs[2].ID).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(orig, "\n")
	nonsense := []string{
		"nonsense",                          // no header
		strings.Replace(orig, "|", "|x", 1), // attempt not a number
		head + "\n",                         // no body
		strings.Replace(orig, "|0|25|", "|0|", 1), // a field missing
	}
	for i, v := range nonsense[:3] {
		id := res.Jobs[i].ID
		if i == 2 {
			v = nonsense[3]
		}
		if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(id, v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, backend.GetParams{ID: id}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Get of record %q = %v, want ErrCorrupt", v, err)
		}
	}
	// A body damaged beyond the header is caught by Get too.
	if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(res.Jobs[1].ID, nonsense[2]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: res.Jobs[1].ID}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get of a record without body = %v, want ErrCorrupt", err)
	}
	// List skips them; Cancel and Retry report them.
	page, err := s.List(ctx, backend.ListParams{Queue: "q"})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != res.Jobs[3].ID {
		t.Fatalf("List past corrupt records = %v, %v; want only the good job %s", ids(page.Jobs), err, res.Jobs[3].ID)
	}
	if _, err := s.Cancel(ctx, backend.CancelParams{ID: res.Jobs[0].ID, Now: now}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Cancel of a corrupt record = %v, want ErrCorrupt", err)
	}
	if _, err := s.Retry(ctx, backend.RetryParams{ID: res.Jobs[0].ID, Now: now}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Retry of a corrupt record = %v, want ErrCorrupt", err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatalf("Claim past corrupt records: %v", err)
	}
	if len(got.Jobs) != 1 || got.Jobs[0].ID != res.Jobs[3].ID {
		t.Fatalf("Claim past corrupt records returned %d jobs, want only the good one %s", len(got.Jobs), res.Jobs[3].ID)
	}
	if err := s.Delete(ctx, backend.DeleteParams{ID: res.Jobs[0].ID, Now: now}); err != nil {
		t.Fatalf("Delete of a corrupt record: %v", err)
	}
	if _, err := s.Get(ctx, backend.GetParams{ID: res.Jobs[0].ID}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
}

// ids lists the ids of jobs.
func ids(jobs []*backend.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestCorruptRecordZeroByte: a record whose first byte is 0 is neither a
// header nor a bare record (isBare), in the scripts as in Go: a claim
// skips it and leaves it as it is.
func TestCorruptRecordZeroByte(t *testing.T) {
	t.Parallel()
	s := openTest(t, "")
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Enqueue(ctx, backend.EnqueueParams{Now: now, Jobs: []backend.NewJob{
		{Type: "t", Queue: "q"}, {Type: "t", Queue: "q"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	num, _ := queueNumOf(res.Jobs[0].ID)
	jobsKey := s.keys.queue(num).jobs()
	c := s.client
	rec, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(res.Jobs[0].ID).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if !isBare(rec) {
		t.Fatalf("record %q is not bare", rec)
	}
	bad := "\x00" + rec[1:]
	if err := c.Do(ctx, c.B().Hset().Key(jobsKey).FieldValue().FieldValue(res.Jobs[0].ID, bad).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatalf("Claim past a record starting with 0: %v", err)
	}
	if len(got.Jobs) != 1 || got.Jobs[0].ID != res.Jobs[1].ID {
		t.Fatalf("Claim past a record starting with 0 returned %d jobs, want only the good one %s", len(got.Jobs), res.Jobs[1].ID)
	}
	after, err := c.Do(ctx, c.B().Hget().Key(jobsKey).Field(res.Jobs[0].ID).Build()).ToString()
	if err != nil || after != bad {
		t.Fatalf("record after the claim = %q, %v; want it left as %q", after, err, bad)
	}
}
