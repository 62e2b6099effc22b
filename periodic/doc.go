// Package periodic enqueues jobs on a schedule: a cron expression or a fixed
// interval, from any number of worker processes at once, each tick exactly
// once and without a leader.
//
// A Schedule names a job template and when to enqueue it. A Scheduler holds
// the schedules of one process and is driven from outside: the caller asks
// Next for the earliest upcoming tick, waits on its own clock and calls Tick
// with its time. The Scheduler starts no goroutines and never reads the
// clock, so a test moves it by arithmetic.
//
// # Exactly once without a leader
//
// Every tick T of the schedule named N is enqueued with
//
//	RunAt     = T
//	UniqueKey = "kyu:periodic:" + N + ":" + T in UTC, RFC 3339 with nanoseconds
//	UniqueFor = twice the tick's allowance
//
// so when several processes enqueue the same tick, the store keeps the first
// and reports the others as duplicates (a normal outcome, shown in Result).
// A tick is due from T for its allowance: the gap to the schedule's next
// tick, at least MinAllowance (30s). No process enqueues it later than
// that: a tick that a stalled process finds past its allowance is skipped
// (another process enqueued it, or none ran and it was missed). The key is
// held for twice the allowance from enqueue, whatever happens to the job,
// even if it is finished and pruned at once, so a late process or a restart
// cannot run a tick again, as long as the processes' clocks differ by less
// than the allowance. All processes must agree on the ticks, which is
// why a cron expression without a time zone is read in UTC (not the
// process's local zone) and an interval counts from the Unix epoch (not from
// the process's start).
//
// # Specs
//
// A spec is a cron expression with five fields (minute hour day-of-month
// month day-of-week) or six (seconds first), as parsed by
// github.com/robfig/cron/v3; a descriptor (@yearly, @monthly, @weekly,
// @daily, @midnight, @hourly); either one optionally prefixed by
// "CRON_TZ=Area/City " or "TZ=Area/City " to read it in that zone; or an
// interval "@every 90s" (a whole number of seconds, at least one), whose ticks
// are the whole multiples of the interval since 1970-01-01T00:00:00Z.
// Time-zone names are looked up with time.LoadLocation: a program that runs
// where the system has no zone database imports time/tzdata.
//
// Across a daylight-saving change a cron tick follows the wall clock of its
// zone: "0 30 2 * * *" in a zone that skips 02:00-03:00 does not fire that
// day, and fires twice on the day the hour repeats (two distinct instants,
// two distinct keys).
//
// # Catching up
//
// A tick that falls while no Scheduler runs is missed. On its first Tick a
// Scheduler applies each schedule's CatchUp policy: CatchUpLast (the
// default) enqueues the latest tick at or before now, so a downtime costs at
// most one run and a tick another process already enqueued stays a
// duplicate; CatchUpNone enqueues only ticks from now on.
package periodic
