package periodic

import (
	"fmt"

	"github.com/kyuhq/kyu/backend"
)

// CatchUp says what a Scheduler's first Tick does about ticks that fell
// before it, while no Scheduler of this process ran.
type CatchUp int

// Catch-up policies.
const (
	// CatchUpLast enqueues the latest tick at or before the first Tick's
	// time (it is a duplicate if another process enqueued it already): a
	// downtime costs at most one run. The default.
	CatchUpLast CatchUp = iota
	// CatchUpNone enqueues only ticks at or after the first Tick's time.
	CatchUpNone
)

// String names the policy.
func (c CatchUp) String() string {
	switch c {
	case CatchUpLast:
		return "last"
	case CatchUpNone:
		return "none"
	}
	return fmt.Sprintf("CatchUp(%d)", int(c))
}

// Schedule enqueues a copy of Job at every tick of Spec.
type Schedule struct {
	// Name identifies the schedule across processes: processes that run
	// the same schedule give it the same name, and each tick's unique key
	// is built from it. Required, at most MaxNameLen bytes, unique within a
	// Scheduler.
	Name string
	// Spec says when it ticks; see ParseSpec.
	Spec string
	// Job is the template enqueued at each tick. Its RunAt, Deadline,
	// UniqueKey and UniqueFor must be zero: the Scheduler sets RunAt and
	// the unique key for each tick. Its Metadata gains "kyu.periodic" (the
	// schedule's name) and "kyu.tick" (the tick in UTC, RFC 3339).
	Job backend.NewJob
	// CatchUp is the policy for ticks missed before the first Tick;
	// default CatchUpLast.
	CatchUp CatchUp
}

// MaxNameLen bounds a schedule's name, so its unique keys stay within the
// store's limit.
const MaxNameLen = 256

// Metadata keys the Scheduler adds to each job it enqueues.
const (
	MetaSchedule = "kyu.periodic"
	MetaTick     = "kyu.tick"
)

// UniqueKeyPrefix starts every unique key the Scheduler sets.
const UniqueKeyPrefix = "kyu:periodic:"
