package faktory

import "time"

// SetAheadWindow changes how soon after its previous FETCH a
// connection's FETCH must come for the group to claim ahead for it.
func SetAheadWindow(l *Listener, d time.Duration) {
	l.fetches.mu.Lock()
	l.fetches.window = d
	l.fetches.mu.Unlock()
}
