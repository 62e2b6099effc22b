#!/usr/bin/env python3
"""A kyu worker handler in Python (see docs/worker.md):

    kyu worker --handle greet='python3 handler.py'

The job is one JSON object on stdin; progress, log lines and the result
go to the control file descriptor as JSON lines; print() goes to the
job's log; the exit code is the outcome.
"""
import json
import os
import sys

EX_DATAERR = 65  # bad input: the job fails for good
EX_TEMPFAIL = 75  # try again later, with backoff

control = os.fdopen(int(os.environ.get("KYU_CONTROL_FD", "3")), "w", buffering=1)


def send(**message):
    control.write(json.dumps(message) + "\n")


job = json.load(sys.stdin)
payload = job.get("payload")
if not isinstance(payload, dict) or "name" not in payload:
    print("payload must be an object with a name", file=sys.stderr)
    sys.exit(EX_DATAERR)

print(f"job {job['id']} ({job['type']}), attempt {job['attempt']} of {job['max_attempts']}")
send(progress=50, message="greeting")
send(log=f"greeting {payload['name']}")
send(result={"handler": "python", "greeting": f"Hello, {payload['name']}!"})
