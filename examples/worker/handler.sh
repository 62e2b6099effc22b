#!/bin/sh
# A kyu worker handler in POSIX sh (see docs/worker.md):
#
#   kyu worker --handle greet='./handler.sh'
#
# The job arrives as one JSON object on stdin; its id, type and attempt
# are in KYU_* variables; lines written to fd 3 report progress, log lines
# and the result; anything printed goes to the job's log; the exit code is
# the outcome (0 done, 75 retry later, 65 bad input: fail for good).
set -eu

job=$(cat)
echo "job $KYU_JOB_ID ($KYU_JOB_TYPE), attempt $KYU_ATTEMPT of $KYU_MAX_ATTEMPTS"

# control writes one JSON message to the control file descriptor.
control() { printf '%s\n' "$1" >&"$KYU_CONTROL_FD"; }

case $job in
*'"payload":null'*) echo "no payload" >&2; exit 65 ;;
esac

control '{"progress":50,"message":"half way"}'
control '{"log":"a line for the job log, sent on fd 3"}'
bytes=$(printf '%s' "$job" | wc -c | tr -d ' ')
control "{\"result\":{\"handler\":\"sh\",\"job_bytes\":$bytes}}"
