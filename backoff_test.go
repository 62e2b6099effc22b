package kyu_test

import (
	"testing"
	"time"

	"github.com/kyuhq/kyu"
)

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	b := kyu.ExponentialBackoff(time.Second, time.Minute)
	for attempt, base := range map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second,
		7: time.Minute, 50: time.Minute, 1000: time.Minute,
	} {
		for range 100 {
			d := b(attempt, nil)
			lo := time.Duration(float64(base) * (1 - kyu.BackoffJitter))
			hi := time.Duration(float64(base) * (1 + kyu.BackoffJitter))
			if d < lo || d > hi {
				t.Fatalf("attempt %d: %s outside [%s, %s]", attempt, d, lo, hi)
			}
		}
	}
}

func TestExponentialBackoffDefaults(t *testing.T) {
	t.Parallel()
	b := kyu.ExponentialBackoff(0, 0)
	if d := b(1, nil); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Errorf("first delay %s, want about 1s", d)
	}
	if d := b(100, nil); d < 48*time.Minute || d > 72*time.Minute {
		t.Errorf("capped delay %s, want about 1h", d)
	}
}

func TestFixedBackoff(t *testing.T) {
	t.Parallel()
	b := kyu.FixedBackoff(3 * time.Second)
	for _, a := range []int{1, 2, 30} {
		if d := b(a, nil); d != 3*time.Second {
			t.Errorf("attempt %d: %s", a, d)
		}
	}
	if d := kyu.FixedBackoff(-1)(1, nil); d != 0 {
		t.Errorf("negative fixed backoff gave %s", d)
	}
}
