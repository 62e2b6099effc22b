// Package daemon is the worker daemon behind `kyu worker`: a kyu.Worker
// whose handler runs each job as a child process, so that a worker can be
// written in any language.
//
// A Daemon serves one set of queues (strict or weighted, with per-queue
// caps, from kyu.PoolConfig) and maps job types to handlers. The exec
// runner starts one process per job: the job as one JSON object on its
// stdin, its fields in its environment, progress, log and result lines on
// file descriptor 3, stdout and stderr as the job's log, and its exit code
// as the outcome (docs/worker.md is the protocol's reference). Each child
// runs in a process group of its own; a timeout, a cancel and a shutdown
// send SIGTERM to the group, then SIGKILL after KillGrace, and the
// attempt is recorded only once the group is gone.
//
// The daemon runs in generations: Reload starts a new kyu.Worker with the
// new config while the old one finishes its jobs; Quiet stops claiming
// and Resume starts again. Stop ends the daemon gracefully, StopNow at
// once; both hand unfinished jobs back without using up an attempt.
//
// On Linux, a guardian process (see ServeGuardianIfAsked) kills the
// children's process groups when the daemon dies without a chance to do
// it itself (kill -9).
package daemon
