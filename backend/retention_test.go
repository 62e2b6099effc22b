package backend

import (
	"errors"
	"testing"
	"time"
)

func TestRetentionKeep(t *testing.T) {
	cases := []struct {
		r       Retention
		s       State
		keep    time.Duration
		forever bool
	}{
		{RetainDefault, StateCompleted, DefaultRetentionCompleted, false},
		{RetainDefault, StateCancelled, DefaultRetentionCancelled, false},
		{RetainDefault, StateFailed, DefaultRetentionFailed, false},
		{RetainNone, StateFailed, 0, false},
		{RetainForever, StateCompleted, 0, true},
		{RetainFor(time.Hour), StateFailed, time.Hour, false},
	}
	for _, c := range cases {
		keep, forever := c.r.Keep(c.s)
		if keep != c.keep || forever != c.forever {
			t.Errorf("%v.Keep(%s) = %v, %v; want %v, %v", c.r, c.s, keep, forever, c.keep, c.forever)
		}
	}
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]Retention{
		"": RetainDefault, "default": RetainDefault, "none": RetainNone,
		"forever": RetainForever, "90m": RetainFor(90 * time.Minute),
	} {
		got, err := ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0s", "-1h", "soon", "1x"} {
		_, err := ParseRetention(bad)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "retention" {
			t.Errorf("ParseRetention(%q) = %v; want a ValidationError naming retention", bad, err)
		}
	}
}

// FuzzParseRetention checks that any text either parses into a valid
// retention that writes back to the same value, or gives a ValidationError.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"", "none", "forever", "default", "24h", "1ns", "-5m", "9999999999h", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRetention(s)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ParseRetention(%q) error %v is not a ValidationError", s, err)
			}
			return
		}
		if !r.Valid() {
			t.Fatalf("ParseRetention(%q) = %d, not valid", s, int64(r))
		}
		back, err := ParseRetention(r.String())
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, r, r.String(), back, err)
		}
	})
}

func TestValidQueueName(t *testing.T) {
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	for name, want := range map[string]bool{
		"default": true, "mail.high": true, "a:b-c_d": true, "Q9": true,
		"": false, "has space": false, "slash/no": false, "ü": false,
		string(long[:128]): true, string(long): false,
	} {
		if got := ValidQueueName(name); got != want {
			t.Errorf("ValidQueueName(%q) = %v; want %v", name, got, want)
		}
	}
}

func TestPrepareLeavesCallerSliceAlone(t *testing.T) {
	jobs := []NewJob{{Type: "t"}}
	p := EnqueueParams{Jobs: jobs, Now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	if jobs[0].Queue != "" || p.Jobs[0].Queue != DefaultQueue {
		t.Fatalf("caller's queue %q, prepared queue %q; want \"\" and %q", jobs[0].Queue, p.Jobs[0].Queue, DefaultQueue)
	}
}

func TestPrepareTimeRange(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]NewJob{
		"run_at":     {Type: "t", RunAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
		"deadline":   {Type: "t", Deadline: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
		"unique_for": {Type: "t", UniqueKey: "k", UniqueFor: 240 * 365 * 24 * time.Hour},
	}
	for field, j := range cases {
		p := EnqueueParams{Jobs: []NewJob{{Type: "ok"}, j}, Now: now}
		err := p.Prepare()
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field || ve.Index != 1 {
			t.Errorf("Prepare with %s out of range = %v; want a ValidationError for item 1's %s", field, err, field)
		}
	}
}
