// BullMQ's side of kyu's peer comparison (bench/peers/run.sh): the same
// four measurements as the Go program in ../cmd/peers, through BullMQ's
// public API, printed as one JSON line with the same fields.
//
//   node peers.mjs --redis redis://127.0.0.1:6379/9 --round 1
//
// Its keys start with the prefix "peersbull" in the database the Redis URL
// names; they are removed before each measurement. Completed jobs are kept
// (BullMQ's default), as the other systems keep theirs.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const { values: opt } = parseArgs({
  options: {
    redis: { type: 'string', default: 'redis://127.0.0.1:6379/9' },
    round: { type: 'string', default: '1' },
    jobs: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '1000' },
    'drain-handlers': { type: 'string', default: '50' },
    'idle-handlers': { type: 'string', default: '10' },
    samples: { type: 'string', default: '1000' },
    gap: { type: 'string', default: '5' }, // ms
    stall: { type: 'string', default: '60000' }, // ms
    poll: { type: 'string', default: '1' }, // ms
  },
});
const jobs = Number(opt.jobs);
const batch = Number(opt.batch);
const drainConc = Number(opt['drain-handlers']);
const idleConc = Number(opt['idle-handlers']);
const samples = Number(opt.samples);
const gap = Number(opt.gap);
const stall = Number(opt.stall);
const poll = Number(opt.poll);

const prefix = 'peersbull';
const queueName = 'peers';
const jobName = 'peers.noop';

// connection: the Redis URL as ioredis options; blocking calls need
// maxRetriesPerRequest null.
const u = new URL(opt.redis);
const connection = {
  host: u.hostname || '127.0.0.1',
  port: Number(u.port || 6379),
  db: Number((u.pathname || '/0').slice(1) || 0),
  maxRetriesPerRequest: null,
};

// The payload: {"p":"xx…"}, 100 bytes of JSON, as for the other systems.
const data = { p: 'x'.repeat(100 - '{"p":""}'.length) };

let queue = null;

// reset removes every key of the prefix and opens the queue anew.
async function reset() {
  if (queue) await queue.close();
  const rdb = new IORedis(connection);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await rdb.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await rdb.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    rdb.disconnect();
  }
  queue = new Queue(queueName, { connection, prefix });
  await queue.waitUntilReady();
}

async function counts() {
  const c = await queue.getJobCounts('wait', 'completed');
  return { pending: c.wait, completed: c.completed };
}

async function expectPending(n, what) {
  const { pending } = await counts();
  if (pending !== n) throw new Error(`${what}: the store holds ${pending} waiting jobs, not ${n}`);
}

// waitFor polls the completed count until it reaches target, failing when
// it stays unchanged for stall.
async function waitCompleted(target) {
  let last = -1;
  let lastChange = performance.now();
  for (;;) {
    const { completed } = await counts();
    if (completed >= target) return;
    const now = performance.now();
    if (completed !== last) {
      last = completed;
      lastChange = now;
    } else if (now - lastChange > stall) {
      throw new Error(`completed jobs stuck at ${completed} of ${target} for ${stall} ms`);
    }
    await sleep(poll);
  }
}

// waitRan waits for done, failing when ran stays unchanged for stall.
async function waitRan(done, ran, target) {
  let last = ran();
  let lastChange = performance.now();
  for (;;) {
    const tick = sleep(100).then(() => false);
    if (await Promise.race([done.then(() => true), tick])) return;
    const now = performance.now();
    if (ran() !== last) {
      last = ran();
      lastChange = now;
    } else if (now - lastChange > stall) {
      throw new Error(`handlers stuck at ${last} of ${target} for ${stall} ms`);
    }
  }
}

function work(conc, onJob) {
  return new Worker(queueName, async () => { onJob(); }, { connection, prefix, concurrency: conc });
}

async function drain(r) {
  let ran = 0;
  let allRan;
  const done = new Promise((resolve) => { allRan = resolve; });
  const begin = performance.now();
  const worker = work(drainConc, () => { if (++ran === jobs) allRan(); });
  try {
    await waitRan(done, () => ran, jobs);
    await waitCompleted(jobs);
    r.drain_per_s = jobs / ((performance.now() - begin) / 1000);
  } finally {
    await worker.close();
  }
  const c = await counts();
  r.ran = ran;
  r.completed = c.completed;
  if (c.pending !== 0 || c.completed !== jobs || ran < jobs) {
    throw new Error(`after the drain: ${ran} handler calls, ${c.completed} completed, ${c.pending} waiting, for ${jobs} jobs`);
  }
}

async function latency(r) {
  let onStart = null;
  const worker = work(idleConc, () => {
    const f = onStart;
    onStart = null;
    if (f) f(performance.now());
  });
  await worker.waitUntilReady();
  const got = [];
  try {
    for (let i = 0; i <= samples; i++) {
      await sleep(gap);
      let timer;
      const started = new Promise((resolve, reject) => {
        onStart = resolve;
        timer = setTimeout(() => reject(new Error(`sample ${i}: the job did not start within ${stall} ms`)), stall);
      });
      const begin = performance.now();
      await queue.add(jobName, data);
      const at = await started.finally(() => clearTimeout(timer));
      if (i > 0) got.push(at - begin);
      await waitCompleted(i + 1);
    }
  } finally {
    await worker.close();
  }
  got.sort((a, b) => a - b);
  const q = (p) => got[Math.max(0, Math.min(got.length - 1, Math.round(p * got.length) - 1))];
  r.p50_ms = Math.round(q(0.5) * 1000) / 1000;
  r.p99_ms = Math.round(q(0.99) * 1000) / 1000;
  r.samples = got.length;
}

function loadAverage() {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return '?';
  }
}

function version(pkg) {
  const path = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(path, 'utf8')).version;
}

async function main() {
  const r = {
    system: 'BullMQ', version: version('bullmq'), store: 'redis', round: Number(opt.round), load: loadAverage(),
    jobs, batch, drain_handlers: drainConc, idle_handlers: idleConc,
  };
  const began = performance.now();

  await reset();
  let begin = performance.now();
  for (let i = 0; i < jobs; i++) await queue.add(jobName, data);
  r.single_per_s = jobs / ((performance.now() - begin) / 1000);
  await expectPending(jobs, 'single enqueue');
  await drain(r);

  await reset();
  const bulk = Array.from({ length: batch }, () => ({ name: jobName, data }));
  begin = performance.now();
  for (let left = jobs; left > 0; left -= batch) await queue.addBulk(left >= batch ? bulk : bulk.slice(0, left));
  r.batch_per_s = jobs / ((performance.now() - begin) / 1000);
  await expectPending(jobs, 'batch enqueue');

  await reset();
  await latency(r);
  await queue.close();
  r.seconds = (performance.now() - began) / 1000;
  process.stdout.write(JSON.stringify(r) + '\n');
}

main().catch((err) => {
  console.error('peers (BullMQ):', err);
  process.exit(1);
});
