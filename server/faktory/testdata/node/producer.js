// producer.js pushes jobs to the Faktory server at FAKTORY_URL with the
// faktory-worker client and prints one JSON line: {"ev":"pushed","n"}.
//
// JOBS (a JSON array of job objects: jid, jobtype, args, queue, priority,
// retry, reserve_for, at, custom) pushes those one by one with PUSH,
// through the client's job builder. Otherwise COUNT jobs are pushed with
// PUSHB in batches of BATCH (default 500): jid PREFIX-i, args [i], type
// "noop", except every FAIL_EVERY-th job (when set) of type "failOnce";
// JOBTYPE overrides the type of all, RESERVE_FOR sets their reserve_for.
// A refused job or a failed connection exits with status 1.
"use strict";
const { Client } = require("faktory-worker");

async function main() {
  const client = new Client();
  await client.connect(); // fails at once on a refused handshake
  let pushed = 0;
  if (process.env.JOBS) {
    for (const spec of JSON.parse(process.env.JOBS)) {
      const job = client.job(spec.jobtype, ...(spec.args || []));
      for (const [field, setter] of [["jid", "jid"], ["queue", "queue"], ["priority", "priority"], ["retry", "retry"],
        ["reserve_for", "reserveFor"], ["at", "at"], ["custom", "custom"]]) {
        if (spec[field] !== undefined) job[setter] = spec[field];
      }
      await job.push();
      pushed++;
    }
  } else {
    const count = Number(process.env.COUNT || 0);
    const batch = Number(process.env.BATCH || 500);
    const failEvery = Number(process.env.FAIL_EVERY || 0);
    const prefix = process.env.PREFIX || "job";
    for (let i = 0; i < count; i += batch) {
      const jobs = [];
      for (let k = i; k < Math.min(i + batch, count); k++) {
        const job = client.job(process.env.JOBTYPE || (failEvery && k % failEvery === 0 ? "failOnce" : "noop"), k);
        job.jid = `${prefix}-${k}`;
        if (process.env.RESERVE_FOR) job.reserveFor = Number(process.env.RESERVE_FOR);
        jobs.push(job);
      }
      const rejected = await client.pushBulk(jobs);
      if (Object.keys(rejected).length) throw new Error(`PUSHB refused ${JSON.stringify(rejected)}`);
      pushed += jobs.length;
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify({ ev: "pushed", n: pushed }) + "\n");
}

main().catch((err) => {
  process.stderr.write(`producer: ${err.stack || err}\n`);
  process.exit(1);
});
