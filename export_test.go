package kyu

import "time"

// SetShutdownTimings shortens, for a test, how long Shutdown waits for
// outcomes on their way (shutdownFlushWait) and how long one recording of
// outcomes may take (outcomeTimeout). Call it before Start.
func SetShutdownTimings(w *Worker, flushWait, outcomeTimeout time.Duration) {
	w.flushWait, w.outcomeTimeout = flushWait, outcomeTimeout
}

// AbandonedMessage is the error recorded for an abandoned attempt.
const AbandonedMessage = abandonedMessage

// HandlerGoroutines counts the worker's handler goroutines, running a
// handler or waiting for a job.
func HandlerGoroutines(w *Worker) int {
	n := 0
	for _, f := range w.fetchers {
		n += int(f.goroutines.Load())
	}
	return n
}

// StepWallClock makes the deadlines w gives its handlers read the wall
// clock as if it had been stepped by step since w was made, while the
// monotonic clock ran on. Call it before Start.
func StepWallClock(w *Worker, step time.Duration) {
	w.timeouts.wall = func() time.Time { return time.Now().Round(0).Add(step) }
}
