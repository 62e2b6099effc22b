#!/bin/sh
# A prefork child for kyu worker in POSIX sh (docs/worker.md): it lives
# for many jobs, reading one job object per line on stdin, and ends each
# with {"done":true} or {"error":"…","retry":true|false} on fd 3. EOF on
# stdin means: exit.
#
#   [handlers.greet]
#   command = ["./prefork.sh"]
#   prefork = 4
#   max_jobs_per_child = 1000
while IFS= read -r job; do
	case $job in
	*'"payload":null'*)
		printf '%s\n' '{"error":"no payload","retry":false}' >&3
		continue ;;
	esac
	echo "child $$ took a job"
	printf '{"result":{"child":%d}}\n{"done":true}\n' $$ >&3
done
