package main

import (
	"context"
	"fmt"
	"time"
)

// waitFor polls count every interval until it reaches target. It fails
// when ctx ends or when count stays unchanged for stall.
func waitFor(ctx context.Context, what string, count func(context.Context) (int64, error), target int64, interval, stall time.Duration) error {
	last, err := count(ctx)
	if err != nil {
		return err
	}
	if last >= target {
		return nil
	}
	lastChange := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-t.C:
			n, err := count(ctx)
			switch {
			case err != nil:
				return err
			case n >= target:
				return nil
			case n != last:
				last, lastChange = n, now
			case now.Sub(lastChange) > stall:
				return fmt.Errorf("%s stuck at %d of %d for %s", what, n, target, stall)
			}
		}
	}
}

// waitClosed waits for done to close, failing when ctx ends or when
// progress stays unchanged for stall.
func waitClosed(ctx context.Context, what string, done <-chan struct{}, progress func() int64, target int64, stall time.Duration) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := progress(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-tick.C:
			if c := progress(); c != last {
				last, lastChange = c, now
			} else if now.Sub(lastChange) > stall {
				return fmt.Errorf("%s stuck at %d of %d for %s", what, c, target, stall)
			}
		}
	}
}
