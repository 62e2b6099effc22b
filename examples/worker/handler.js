#!/usr/bin/env node
// A kyu worker handler in Node.js (see docs/worker.md):
//
//   kyu worker --handle greet='node handler.js'
//
// The job is one JSON object on stdin; progress, log lines and the result
// go to the control file descriptor as JSON lines; console output goes to
// the job's log; the exit code is the outcome.
'use strict';
const fs = require('fs');

const EX_DATAERR = 65; // bad input: the job fails for good
const controlFD = Number(process.env.KYU_CONTROL_FD || 3);
const send = (message) => fs.writeSync(controlFD, JSON.stringify(message) + '\n');

const job = JSON.parse(fs.readFileSync(0, 'utf8'));
const payload = job.payload;
if (payload === null || typeof payload !== 'object' || !payload.name) {
  console.error('payload must be an object with a name');
  process.exit(EX_DATAERR);
}
console.log(`job ${job.id} (${job.type}), attempt ${job.attempt} of ${job.max_attempts}`);
send({ progress: 50, message: 'greeting' });
send({ log: `greeting ${payload.name}` });
send({ result: { handler: 'node', greeting: `Hello, ${payload.name}!` } });
