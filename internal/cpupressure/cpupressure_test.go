package cpupressure

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	const content = "some avg10=16.33 avg60=14.23 avg300=11.19 total=99386805\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	got, ok := parse(content)
	if !ok || got != 99386805*time.Microsecond {
		t.Fatalf("parse = %v, %v; want 99.386805s, true", got, ok)
	}
	for _, bad := range []string{"", "full avg10=0.00 total=5\n", "some avg10=1.00\n", "some total=x\n", "some total=-3\n"} {
		if got, ok := parse(bad); ok {
			t.Errorf("parse(%q) = %v, true; want false", bad, got)
		}
	}
}

// Where the system reports pressure, a share measured over a span lies
// between 0 and 1; a missing reading gives none.
func TestShare(t *testing.T) {
	t.Parallel()
	start := Read()
	if !start.Reported() {
		t.Skip("this system does not report CPU pressure (" + file + ")")
	}
	began := time.Now()
	time.Sleep(20 * time.Millisecond)
	share := start.Share(time.Since(began))
	if share == nil || *share < 0 || *share > 1 {
		t.Fatalf("Share = %v; want a value in [0, 1]", share)
	}
	if s := (Mark{}).Share(time.Second); s != nil {
		t.Fatalf("Share of a missing reading = %v, want nil", *s)
	}
}
