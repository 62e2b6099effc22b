#!/usr/bin/env bash
# Runs kyu beside asynq, BullMQ and River on this machine's Redis and
# PostgreSQL, and kyu on its embedded store: four measurements per system
# (batch enqueue, one producer enqueuing one job per call, drain, idle
# enqueue-to-start latency) in rounds that alternate the systems' order,
# then one table per store with kyu's figures beside each peer's.
#
#   bench/peers/run.sh [-r ROUNDS] [-n JOBS] [-s SAMPLES] [-o RESULTS] [SYSTEM...]
#
# SYSTEM is any of kyu-redis asynq bullmq kyu-postgres river kyu-embedded
# (default all). PEERS_REDIS_URL (default redis://127.0.0.1:6379/9) and
# PEERS_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
# name the stores; the systems' keys (prefixes peerskyu, peersbull and
# asynq's "asynq:") are removed from that Redis database, and the schemas
# peers_kyu and peers_river dropped and made again in that database.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"

rounds=3 jobs=20000 samples=1000 out=""
while getopts "r:n:s:o:h" o; do
  case $o in
    r) rounds=$OPTARG ;;
    n) jobs=$OPTARG ;;
    s) samples=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
systems=("$@")
[ ${#systems[@]} -gt 0 ] || systems=(kyu-redis asynq bullmq kyu-postgres river kyu-embedded)
for s in "${systems[@]}"; do
  case $s in
    kyu-redis | asynq | bullmq | kyu-postgres | river | kyu-embedded) ;;
    *) echo "run.sh: unknown system $s (want kyu-redis asynq bullmq kyu-postgres river kyu-embedded)" >&2; exit 2 ;;
  esac
done

redis_url=${PEERS_REDIS_URL:-redis://127.0.0.1:6379/9}
pg_url=${PEERS_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}

need() {
  command -v "$1" >/dev/null || { echo "run.sh: $1 is missing: $2" >&2; exit 1; }
}
need go "install Go 1.26 (see go.mod)"
if [[ " ${systems[*]} " == *" bullmq "* ]]; then
  need node "BullMQ runs on Node.js 20 or later (apt-get install nodejs npm)"
  need npm "BullMQ's packages are installed with npm (apt-get install npm)"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] || out="$work/results.jsonl"
: >"$out"

echo "building" >&2
(cd "$here" && go build -o "$work/peers" ./cmd/peers)
if [[ " ${systems[*]} " == *" bullmq "* ]] &&
  { [ ! -f "$here/bullmq/node_modules/.package-lock.json" ] ||
    [ "$here/bullmq/package-lock.json" -nt "$here/bullmq/node_modules/.package-lock.json" ]; }; then
  (cd "$here/bullmq" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

if ! "$work/peers" check -redis "$redis_url" -postgres "$pg_url"; then
  echo "run.sh: start Redis and PostgreSQL first, or name others with PEERS_REDIS_URL and PEERS_POSTGRES_URL" >&2
  exit 1
fi

kyu_version=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo dev)
if [ -n "$(git -C "$root" status --porcelain -- . ':!bench/peers' 2>/dev/null)" ]; then
  kyu_version="$kyu_version+changes"
fi

began=$(date +%s)
for round in $(seq 1 "$rounds"); do
  order=("${systems[@]}")
  if ((round % 2 == 0)); then # every other round runs them in reverse
    order=()
    for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[i]}"); done
  fi
  load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
  echo "round $round of $rounds: load average $load; ${order[*]}" >&2
  printf '{"round":%d,"load":"%s","time":"%s"}\n' "$round" "$load" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$out"
  for s in "${order[@]}"; do
    t0=$(date +%s)
    if [ "$s" = bullmq ]; then
      node "$here/bullmq/peers.mjs" --redis "$redis_url" --round "$round" --jobs "$jobs" --samples "$samples" >>"$out"
    else
      "$work/peers" run -system "$s" -round "$round" -jobs "$jobs" -samples "$samples" \
        -redis "$redis_url" -postgres "$pg_url" -dir "$work" -kyu-version "$kyu_version" >>"$out"
    fi
    echo "  $s: $(($(date +%s) - t0)) s" >&2
  done
done
echo "done in $(($(date +%s) - began)) s; results in $out" >&2
echo
"$work/peers" table "$out"
