package periodic_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone database, whatever the machine has

	"github.com/kyuhq/kyu/periodic"
)

func date(y int, mo time.Month, d, h, mi, s int) time.Time {
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

func mustSpec(t *testing.T, spec string) periodic.Spec {
	t.Helper()
	s, err := periodic.ParseSpec(spec)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", spec, err)
	}
	return s
}

// ticks lists the first n ticks of s strictly after from.
func ticks(s periodic.Spec, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

func wantTicks(t *testing.T, spec string, from time.Time, want ...time.Time) {
	t.Helper()
	got := ticks(mustSpec(t, spec), from, len(want))
	if len(got) != len(want) {
		t.Fatalf("%q after %s: %d ticks %v; want %v", spec, from, len(got), got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%q after %s: tick %d = %s; want %s (all: %v)", spec, from, i, got[i], want[i], got)
		}
	}
}

func TestCronFiveFields(t *testing.T) {
	t.Parallel()
	from := date(2030, 1, 1, 0, 0, 0)
	wantTicks(t, "*/5 * * * *", from, date(2030, 1, 1, 0, 5, 0), date(2030, 1, 1, 0, 10, 0), date(2030, 1, 1, 0, 15, 0))
	wantTicks(t, "30 9 * * MON-FRI", from, // 2030-01-01 is a Tuesday
		date(2030, 1, 1, 9, 30, 0), date(2030, 1, 2, 9, 30, 0), date(2030, 1, 3, 9, 30, 0), date(2030, 1, 4, 9, 30, 0), date(2030, 1, 7, 9, 30, 0))
	// Strictly after: a tick at from is not Next(from).
	wantTicks(t, "0 * * * *", date(2030, 1, 1, 3, 0, 0), date(2030, 1, 1, 4, 0, 0))
}

func TestCronWithSeconds(t *testing.T) {
	t.Parallel()
	from := date(2030, 1, 1, 0, 0, 0)
	wantTicks(t, "*/10 * * * * *", from, date(2030, 1, 1, 0, 0, 10), date(2030, 1, 1, 0, 0, 20), date(2030, 1, 1, 0, 0, 30))
	wantTicks(t, "15 0 12 * * *", from, date(2030, 1, 1, 12, 0, 15), date(2030, 1, 2, 12, 0, 15))
	// A fractional second is after the whole second: the next tick follows it.
	wantTicks(t, "*/10 * * * * *", from.Add(10*time.Second+time.Millisecond), date(2030, 1, 1, 0, 0, 20))
}

func TestDescriptors(t *testing.T) {
	t.Parallel()
	from := date(2030, 5, 17, 13, 45, 0) // a Friday
	wantTicks(t, "@hourly", from, date(2030, 5, 17, 14, 0, 0), date(2030, 5, 17, 15, 0, 0))
	wantTicks(t, "@daily", from, date(2030, 5, 18, 0, 0, 0), date(2030, 5, 19, 0, 0, 0))
	wantTicks(t, "@midnight", from, date(2030, 5, 18, 0, 0, 0))
	wantTicks(t, "@weekly", from, date(2030, 5, 19, 0, 0, 0), date(2030, 5, 26, 0, 0, 0))
	wantTicks(t, "@monthly", from, date(2030, 6, 1, 0, 0, 0), date(2030, 7, 1, 0, 0, 0))
	wantTicks(t, "@yearly", from, date(2031, 1, 1, 0, 0, 0))
	wantTicks(t, "@annually", from, date(2031, 1, 1, 0, 0, 0))
}

func TestCronIsUTCWithoutZone(t *testing.T) {
	t.Parallel()
	// The same instant given in another location gives the same tick: a
	// spec without a zone does not follow the caller's (or the process's)
	// local zone.
	tokyo := time.FixedZone("UTC+9", 9*3600)
	s := mustSpec(t, "0 0 9 * * *")
	a := s.Next(date(2030, 1, 1, 0, 0, 0))
	b := s.Next(date(2030, 1, 1, 0, 0, 0).In(tokyo))
	if !a.Equal(b) || !a.Equal(date(2030, 1, 1, 9, 0, 0)) {
		t.Fatalf("Next in UTC = %s, from Tokyo = %s; want both 09:00 UTC", a, b)
	}
	if b.Location() != tokyo {
		t.Fatalf("Next returned a time in %s; want the argument's location", b.Location())
	}
}

func TestTimeZoneAndDST(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// Europe/Paris moves from UTC+1 to UTC+2 at 2030-03-31 01:00 UTC (02:00
	// local becomes 03:00), and back at 2030-10-27 01:00 UTC.
	for _, prefix := range []string{"CRON_TZ=Europe/Paris ", "TZ=Europe/Paris "} {
		// 09:00 local stays 09:00 local across the change: 08:00Z, then 07:00Z.
		wantTicks(t, prefix+"0 9 * * *", date(2030, 3, 29, 12, 0, 0),
			date(2030, 3, 30, 8, 0, 0), date(2030, 3, 31, 7, 0, 0), date(2030, 4, 1, 7, 0, 0))
	}
	// 02:30 local does not exist on 2030-03-31: that day has no tick.
	got := ticks(mustSpec(t, "CRON_TZ=Europe/Paris 0 30 2 * * *"), date(2030, 3, 29, 12, 0, 0), 3)
	var days []string
	for _, g := range got {
		days = append(days, g.In(paris).Format("01-02 15:04"))
	}
	if strings.Join(days, " ") != "03-30 02:30 04-01 02:30 04-02 02:30" {
		t.Fatalf("02:30 Paris across the spring change = %v; want 03-30, 04-01, 04-02 (03-31 has no 02:30)", days)
	}
	// 02:30 local happens twice on 2030-10-27: two instants, an hour apart.
	wantTicks(t, "CRON_TZ=Europe/Paris 0 30 2 * * *", date(2030, 10, 26, 12, 0, 0),
		date(2030, 10, 27, 0, 30, 0), date(2030, 10, 27, 1, 30, 0), date(2030, 10, 28, 1, 30, 0))
	// Prev walks back across both changes just as well.
	fall := mustSpec(t, "CRON_TZ=Europe/Paris 0 30 2 * * *")
	for _, c := range []struct{ at, want time.Time }{
		{date(2030, 10, 27, 1, 45, 0), date(2030, 10, 27, 1, 30, 0)},  // the second 02:30
		{date(2030, 10, 27, 1, 29, 59), date(2030, 10, 27, 0, 30, 0)}, // the first 02:30
		{date(2030, 10, 27, 0, 29, 59), date(2030, 10, 26, 0, 30, 0)},
		{date(2030, 4, 1, 0, 29, 59), date(2030, 3, 30, 1, 30, 0)}, // 03-31 has none
	} {
		if p := fall.Prev(c.at); !p.Equal(c.want) {
			t.Errorf("Prev(%s) of 02:30 Paris = %s; want %s", c.at, p, c.want)
		}
	}
	s := mustSpec(t, "CRON_TZ=Europe/Paris 0 9 * * *")
	if p := s.Prev(date(2030, 4, 1, 6, 59, 59)); !p.Equal(date(2030, 3, 31, 7, 0, 0)) {
		t.Fatalf("Prev before 09:00 Paris on 04-01 = %s; want 2030-03-31 07:00 UTC", p)
	}
}

func TestEveryAlignedToEpoch(t *testing.T) {
	t.Parallel()
	s := mustSpec(t, "@every 90s")
	// Two processes started at different moments agree on the ticks.
	a := ticks(s, date(2030, 1, 1, 0, 0, 7), 3)
	b := ticks(s, date(2030, 1, 1, 0, 1, 13).Add(123*time.Millisecond), 2)
	if !a[0].Equal(b[0]) || !a[1].Equal(b[1]) {
		t.Fatalf("ticks from two starts disagree: %v and %v", a, b)
	}
	for _, tick := range a {
		if tick.Unix()%90 != 0 {
			t.Fatalf("tick %s is not a multiple of 90s since the epoch", tick)
		}
	}
	wantTicks(t, "@every 1h", date(2030, 1, 1, 10, 59, 59), date(2030, 1, 1, 11, 0, 0), date(2030, 1, 1, 12, 0, 0))
	if p := s.Prev(date(2030, 1, 1, 0, 0, 0)); !p.Equal(date(2030, 1, 1, 0, 0, 0)) {
		t.Fatalf("Prev of a tick = %s; want the tick itself", p)
	}
	if p := s.Prev(date(2030, 1, 1, 0, 0, 0).Add(-time.Nanosecond)); !p.Equal(date(2029, 12, 31, 23, 58, 30)) {
		t.Fatalf("Prev just before a tick = %s; want the tick before", p)
	}
	// Before the epoch too.
	if p := s.Prev(time.Unix(-1, 0)); p.Unix() != -90 {
		t.Fatalf("Prev(epoch-1s) = %d; want -90", p.Unix())
	}
}

// TestPrevAgreesWithNext checks Prev against Next at random instants:
// Prev(t) is a tick at or before t, and the next tick after it is after t.
func TestPrevAgreesWithNext(t *testing.T) {
	t.Parallel()
	specs := []string{
		"*/5 * * * *", "*/10 * * * * *", "30 9 * * MON-FRI", "0 0 29 2 *", "@hourly", "@monthly",
		"CRON_TZ=Europe/Paris 0 30 2 * * *", "CRON_TZ=America/New_York 0 0 0 * * SUN", "@every 7s", "@every 25h",
		"* 0-58 * * * *", "0 0 12 1 1 *",
	}
	r := rand.New(rand.NewPCG(1, 2))
	base := date(2030, 1, 1, 0, 0, 0)
	for _, spec := range specs {
		s := mustSpec(t, spec)
		for range 200 {
			at := base.Add(time.Duration(r.Int64N(int64(3 * 365 * 24 * time.Hour))))
			if r.IntN(4) == 0 {
				at = at.Truncate(time.Minute) // often exactly on a tick
			}
			p := s.Prev(at)
			if p.IsZero() || p.After(at) {
				t.Fatalf("%q: Prev(%s) = %s; want a tick at or before it", spec, at, p)
			}
			if n := s.Next(p); !n.After(at) {
				t.Fatalf("%q: Prev(%s) = %s, but %s is a later tick at or before it", spec, at, p, n)
			}
			if n := s.Next(p.Add(-time.Nanosecond)); !n.Equal(p) {
				t.Fatalf("%q: Prev(%s) = %s is not a tick (the tick there is %s)", spec, at, p, n)
			}
		}
	}
}

func TestBadSpecs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ spec, reason string }{
		{"", "empty"},
		{"   ", "empty"},
		{"* * *", "expected 5 to 6 fields"},
		{"61 * * * *", "above maximum"},
		{"*/5 * * * * * *", "expected 5 to 6 fields"},
		{"0 0 30 2 *", "matches no time"},
		{"@fortnightly", "unrecognized descriptor"},
		{"@every", "@every <duration>"},
		{"@every soon", "not a duration"},
		{"@every 500ms", "less than one second"},
		{"@every 1500ms", "whole number of seconds"},
		{"@every -5m", "less than one second"},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", "unknown time zone"},
		{"TZ=Europe/Paris", "needs an expression"},
		{"CRON_TZ= 0 9 * * *", "empty time zone"},
		{"TZ=Local 0 9 * * *", "differs between processes"},
		{"TZ=UTC TZ=Europe/Paris 0 9 * * *", "more than one"},
		{"TZ=Europe/Paris @every 5m", "takes no time zone"},
	} {
		s, err := periodic.ParseSpec(c.spec)
		var se *periodic.SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParseSpec(%q) = (%v, %v); want a *SpecError", c.spec, s, err)
			continue
		}
		if se.Spec != c.spec || !strings.Contains(se.Reason, c.reason) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("ParseSpec(%q) = %q (spec %q, reason %q); want the spec and a reason with %q", c.spec, err, se.Spec, se.Reason, c.reason)
		}
	}
}

// FuzzParseSpec checks that no text makes the parser panic or hang, and
// that a spec that parses keeps Next strictly after and Prev at or before.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"*/5 * * * *", "0 30 2 * * *", "@every 90s", "CRON_TZ=Europe/Paris 0 9 * * *", "TZ=", "5-/2 * * * *", "@daily"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := periodic.ParseSpec(spec)
		if err != nil {
			var se *periodic.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSpec(%q) error %v is not a *SpecError", spec, err)
			}
			return
		}
		at := date(2030, 6, 15, 12, 34, 56)
		if n := s.Next(at); !n.IsZero() && !n.After(at) {
			t.Fatalf("%q: Next(%s) = %s", spec, at, n)
		}
		if p := s.Prev(at); !p.IsZero() && p.After(at) {
			t.Fatalf("%q: Prev(%s) = %s", spec, at, p)
		}
	})
}
