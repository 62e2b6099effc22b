// worker.js runs jobs from the Faktory server at FAKTORY_URL with the
// faktory-worker client's Worker and writes what happens to stdout, one
// JSON line each:
//   {"ev":"ready","wid"}                 working, after the first BEAT
//   {"ev":"run","jid","jobtype","args","queue","priority","retry","custom","failed"}
//                                       a job started ("failed": it carries
//                                       an earlier attempt's failure)
//   {"ev":"beat","state"}                a BEAT answered quiet or terminate
//   {"ev":"quiet"}                       the worker quieted: it fetches no more
//   {"ev":"exit"}                        the worker stopped (terminate)
//
// Environment: CONCURRENCY (default 20), QUEUES (comma-separated, default
// "default"), WID, BEAT_INTERVAL (seconds, default 15), LOG_RUNS=0 to
// leave out the run lines (throughput runs).
//
// Job types: noop; failOnce (fails its first attempt, succeeds after);
// hangOnce (its first attempt never ends: the test kills the worker;
// an attempt that carries a failure succeeds); echo (as noop, for the
// fields of jobs enqueued through kyu).
"use strict";
const { Worker } = require("faktory-worker");

const logRuns = process.env.LOG_RUNS !== "0";
const out = (line) => process.stdout.write(JSON.stringify(line) + "\n");

function record(job) {
  if (!logRuns) return;
  out({
    ev: "run", jid: job.jid, jobtype: job.jobtype, args: job.args, queue: job.queue,
    priority: job.priority, retry: job.retry, custom: job.custom, failed: Boolean(job.failure),
  });
}

const worker = new Worker({
  wid: process.env.WID,
  concurrency: Number(process.env.CONCURRENCY || 20),
  queues: (process.env.QUEUES || "default").split(","),
  beatInterval: Number(process.env.BEAT_INTERVAL || 15),
});

worker.register("noop", () => async ({ job }) => record(job));
worker.register("echo", () => async ({ job }) => record(job));
worker.register("failOnce", () => async ({ job }) => {
  record(job);
  if (!job.failure) {
    const err = new Error(`first attempt of ${job.jid} fails`);
    err.code = "FirstAttempt";
    throw err;
  }
});
worker.register("hangOnce", () => async ({ job }) => {
  record(job);
  if (!job.failure) await new Promise(() => {});
});

// Report the states BEAT brings, as the client reads them.
const beat = worker.client.beat.bind(worker.client);
worker.client.beat = async () => {
  const state = await beat();
  if (state !== "OK") out({ ev: "beat", state });
  return state;
};
const quiet = worker.quiet.bind(worker);
worker.quiet = () => {
  if (!worker.quieted) out({ ev: "quiet" });
  quiet();
};
const stop = worker.stop.bind(worker);
worker.stop = async () => {
  await stop();
  out({ ev: "exit" });
};

worker.work().then(
  () => out({ ev: "ready", wid: worker.wid }),
  (err) => {
    process.stderr.write(`worker: ${err.stack || err}\n`);
    process.exit(1);
  },
);
