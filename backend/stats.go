package backend

import "time"

// StatsParams asks for statistics at Now, with the counters of the last
// Minutes minutes (0 for none, at most StatsHistory/time.Minute).
type StatsParams struct {
	Now     time.Time
	Minutes int
}

// StatsHistory is how long per-minute counters are kept.
const StatsHistory = 24 * time.Hour

// Stats is a picture of the store at one moment.
type Stats struct {
	// Queues lists, by name, every queue that holds a job or has settings;
	// a store may also list queues that held jobs once.
	Queues []QueueInfo
	// Minutes has one entry per minute of the last StatsParams.Minutes
	// minutes, oldest first, ending with the minute that holds Now;
	// minutes with nothing processed are present with zero counts.
	Minutes []MinuteCount
	// Processed and Failed count every attempt that ended since the store
	// was created (see MinuteCount).
	Processed int64
	Failed    int64
}

// QueueInfo describes one queue.
type QueueInfo struct {
	Name     string
	Counts   map[State]int64 // every state present, zero or not
	Settings QueueSettings
	// OldestPending is the earliest RunAt among the queue's pending jobs
	// (zero when none is pending); Now minus it is the queue's latency.
	OldestPending time.Time
	// LastFiveMinutes and LastHour count the queue's attempts that ended
	// (as MinuteCount counts them) in the minute holding Now and the 4
	// (59) minutes before it: the queue's throughput and error rate.
	LastFiveMinutes AttemptCount
	LastHour        AttemptCount
}

// AttemptCount counts ended attempts, as MinuteCount does.
type AttemptCount struct {
	Processed int64 `json:"processed"`
	Failed    int64 `json:"failed"`
}

// QueueStatsHistory is how long per-queue per-minute counters are kept
// (the longest window of QueueInfo).
const QueueStatsHistory = time.Hour

// Add adds c, the counts of the minute starting at m, to those windows of
// q that hold m at now.
func (q *QueueInfo) Add(now, m time.Time, c AttemptCount) {
	last := MinuteOf(now)
	if m.After(last) {
		return
	}
	if m.After(last.Add(-5 * time.Minute)) {
		q.LastFiveMinutes.Processed += c.Processed
		q.LastFiveMinutes.Failed += c.Failed
	}
	if m.After(last.Add(-QueueStatsHistory)) {
		q.LastHour.Processed += c.Processed
		q.LastHour.Failed += c.Failed
	}
}

// MinuteCount counts the attempts that ended in one minute: Processed
// counts each Complete and each Fail (whatever comes of the job) and each
// lease that RecoverLeases ended; Failed counts the Fails and the
// recovered leases among them. Release counts in neither.
type MinuteCount struct {
	Minute    time.Time // the start of the minute, UTC
	Processed int64
	Failed    int64
}

// Check validates a stats request.
func (p *StatsParams) Check() error {
	if err := CheckNow(p.Now); err != nil {
		return err
	}
	if p.Minutes < 0 || p.Minutes > int(StatsHistory/time.Minute) {
		return invalid("minutes", "%d is outside [0, %d]", p.Minutes, int(StatsHistory/time.Minute))
	}
	return nil
}

// MinuteOf returns the start of the minute holding t, in UTC: the key
// every store counts an ended attempt under.
func MinuteOf(t time.Time) time.Time {
	return t.UTC().Truncate(time.Minute)
}

// NewCounts returns a count map holding every state at zero.
func NewCounts() map[State]int64 {
	m := make(map[State]int64, 7)
	for _, s := range States() {
		m[s] = 0
	}
	return m
}
