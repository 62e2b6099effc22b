package kyu

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// newHoldingCompleter returns the completer of a worker with one fetcher
// of concurrency 2, and that fetcher, with one outcome pending and no
// handler running.
func newHoldingCompleter() (*completer, *fetcher) {
	w := &Worker{}
	f := &fetcher{w: w, slots: newSlots(2, 0)}
	w.fetchers = []*fetcher{f}
	w.comp = newCompleter(w, 4)
	w.comp.pending = append(w.comp.pending, &jobRun{})
	return w.comp, f
}

// gatherAsync runs c.gather on a goroutine of its own; the channel is
// closed when it returns.
func gatherAsync(c *completer) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		c.gather(context.Background())
		close(done)
	}()
	return done
}

func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// While a fetcher claims as slots free up, the completer holds its
// outcomes until that fetcher's next claim begins, so that a store that
// groups commits writes both with one sync instead of syncing the
// outcomes alone just before the claim.
func TestCompleterHoldsOutcomesForTheDueClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f := newHoldingCompleter()
		f.setActive(true)
		done := gatherAsync(c)
		synctest.Wait()
		if returned(done) {
			t.Fatal("outcomes taken before the claim that was due began")
		}
		c.claimStarts()
		synctest.Wait()
		if !returned(done) {
			t.Fatal("outcomes still held after the claim began")
		}
		if len(c.batch) != 1 {
			t.Errorf("%d outcomes taken, want 1", len(c.batch))
		}
	})
}

// The completer does not hold outcomes when no claim is due, while a
// claim is under way, or while the fetcher waits for it (a slot held
// until its outcome is recorded); and no longer than completerLinger, or
// once the fetcher stops claiming.
func TestCompleterHoldsOutcomesOnlyForAClaimToCome(t *testing.T) {
	cases := []struct {
		name string
		set  func(c *completer, f *fetcher)
		// after is how long gather takes; step, if set, is done once
		// gather waits, and gather must then return.
		after time.Duration
		step  func(c *completer, f *fetcher)
	}{
		{name: "no claim due", set: func(*completer, *fetcher) {}},
		{name: "claim under way", set: func(c *completer, f *fetcher) {
			f.setActive(true)
			c.claimStarts()
		}},
		{name: "slot held", set: func(c *completer, f *fetcher) {
			f.setActive(true)
			f.slots.held.Add(1)
		}},
		{name: "no claim comes", set: func(c *completer, f *fetcher) { f.setActive(true) }, after: completerLinger},
		{name: "fetcher stops", set: func(c *completer, f *fetcher) { f.setActive(true) },
			step: func(c *completer, f *fetcher) { f.setActive(false) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, f := newHoldingCompleter()
				tc.set(c, f)
				start := time.Now()
				done := gatherAsync(c)
				synctest.Wait()
				if tc.step != nil {
					if returned(done) {
						t.Fatal("gather returned before the step")
					}
					tc.step(c, f)
					synctest.Wait()
				}
				<-done
				if took := time.Since(start); took != tc.after {
					t.Errorf("gather took %v, want %v", took, tc.after)
				}
				if len(c.batch) != 1 {
					t.Errorf("%d outcomes taken, want 1", len(c.batch))
				}
			})
		})
	}
}
