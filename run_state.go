package kyu

import "sync/atomic"

// runState is where a claimed job's run stands. Every change of it is one
// of the transitions below, each a compare-and-swap, so the handler's
// goroutine, the heartbeater, the completer and Shutdown agree on who
// acts on a run without a lock:
//
//	claimed ──▶ running ──▶ finished ─────────────────────────▶ recorded
//	              │  ▲          (handler returned; outcome queued)
//	              ▼  │
//	          cancelled, lost, expired  (the handler still runs)
//	              │
//	              ├─▶ dropped   (handler returned; outcome thrown away)
//	              ├─▶ abandoned (Shutdown past its grace: lease released)
//	              └─▶ timedOut  (past timeout plus grace: attempt failed)
//
// claimed, running, cancelled, lost and expired are live: the handler has
// not returned and the run is its own. cancelled, lost and expired each
// cancel the handler's context (with ErrCancelled, ErrLeaseLost,
// ErrLeaseLost). From lost a successful outcome is still recorded (the
// store refuses it if the lease is really gone) and a failure dropped;
// from expired every outcome is dropped. lost is not followed by expired:
// its context is cancelled already. finished, dropped, abandoned and
// timedOut end in recorded once the slot is given back; a handler that
// returns after its run was abandoned or timed out finds it no longer
// live, and its outcome is dropped.
type runState int32

const (
	runClaimed   runState = iota // claimed, handler not started
	runRunning                   // handler running
	runCancelled                 // cancel requested; handler running
	runLost                      // lease reported lost; handler running
	runExpired                   // lease about to expire unrenewed; handler running
	runFinished                  // handler returned; outcome on its way to the store
	runDropped                   // handler returned; outcome dropped
	runAbandoned                 // taken from its handler by Shutdown
	runTimedOut                  // taken from its handler past its timeout
	runRecorded                  // outcome recorded or dropped; slot given back
)

var runStateNames = [...]string{"claimed", "running", "cancelled", "lost", "expired",
	"finished", "dropped", "abandoned", "timed out", "recorded"}

func (s runState) String() string { return runStateNames[s] }

// live reports whether the handler has not returned and the run is its own.
func (s runState) live() bool { return s <= runExpired }

// runMachine holds a run's state; the zero value is claimed.
type runMachine struct{ state atomic.Int32 }

// load returns the current state.
func (m *runMachine) load() runState { return runState(m.state.Load()) }

// move changes the state to the one next returns for the current state,
// if next allows (ok), and returns the state it moved from.
func (m *runMachine) move(next func(runState) (runState, bool)) (from runState, moved bool) {
	for {
		from = m.load()
		to, ok := next(from)
		if !ok {
			return from, false
		}
		if m.state.CompareAndSwap(int32(from), int32(to)) {
			return from, true
		}
	}
}

// start: claimed → running, as the handler is called.
func (m *runMachine) start() {
	m.move(func(s runState) (runState, bool) { return runRunning, s == runClaimed })
}

// requestCancel: running → cancelled, when a heartbeat reports a cancel
// request. It reports whether the caller should cancel the handler's
// context (once per run, and not once the lease is lost).
func (m *runMachine) requestCancel() bool {
	_, ok := m.move(func(s runState) (runState, bool) {
		return runCancelled, s == runClaimed || s == runRunning
	})
	return ok
}

// loseLease: claimed, running or cancelled → lost, when a heartbeat
// reports the lease lost. It reports whether the caller should cancel
// the handler's context.
func (m *runMachine) loseLease() bool {
	_, ok := m.move(func(s runState) (runState, bool) { return runLost, s <= runCancelled })
	return ok
}

// expireLease: claimed, running or cancelled → expired, when the lease
// is about to expire without renewal. It reports whether the caller
// should cancel the handler's context. A lost lease is left lost: its
// handler's context is cancelled already.
func (m *runMachine) expireLease() bool {
	_, ok := m.move(func(s runState) (runState, bool) { return runExpired, s <= runCancelled })
	return ok
}

// returned: a live run → finished when its outcome is to be recorded, or
// dropped when the lease is gone (expired; lost and failed is true). It
// returns the state the run is in afterwards: neither finished nor
// dropped means the run was taken from the handler (abandoned, timedOut
// or already recorded), whose outcome is then dropped.
func (m *runMachine) returned(failed bool) runState {
	from, moved := m.move(func(s runState) (runState, bool) {
		switch {
		case !s.live():
			return s, false
		case s == runExpired || (s == runLost && failed):
			return runDropped, true
		}
		return runFinished, true
	})
	switch {
	case !moved:
		return from
	case from == runExpired || (from == runLost && failed):
		return runDropped
	}
	return runFinished
}

// abandon: a live run → abandoned, at Shutdown past its grace. It reports
// whether the run was live (the caller then releases its lease).
func (m *runMachine) abandon() bool {
	_, ok := m.move(func(s runState) (runState, bool) { return runAbandoned, s.live() })
	return ok
}

// timeOut: a live run → timedOut, when its handler has overrun its
// timeout plus grace. It reports whether the run was live (the caller
// then fails its attempt).
func (m *runMachine) timeOut() bool {
	_, ok := m.move(func(s runState) (runState, bool) { return runTimedOut, s.live() })
	return ok
}

// record: finished, dropped, abandoned or timedOut → recorded, once the
// outcome is recorded (or dropped) and the slot given back.
func (m *runMachine) record() {
	m.move(func(s runState) (runState, bool) { return runRecorded, !s.live() && s != runRecorded })
}
