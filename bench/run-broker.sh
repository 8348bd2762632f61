#!/usr/bin/env bash
# Broker benchmarks against the local stack (started here if it is not up, stopped again after):
#   1. broker_bench: job-store throughput and bytes per job in Redis, bytes per held job in delayd.
#   2. the whole pipeline: N records published with kcat, all due at one instant DUE_MS later;
#      measured: how fast delayd ingests them (accepted in Redis), and how fast it delivers them
#      once due (from the due instant until Redis says ready for the last one).
# Prints one JSON object per line.
#   N=100000 bench/run-broker.sh
#   SMOKE=1 BUILD_DIR=build bench/run-broker.sh   2 000 jobs each, due 3 s after publish, with the
#                                                 binaries of BUILD_DIR (the ctest bench.broker_smoke)
# Settings (environment): N (100000 [2000]: the pipeline's jobs), BENCH_N (200000 [2000]:
# broker_bench's), DUE_MS (20000 [3000]: from publish to the jobs' instant), BUILD_DIR (binaries
# built there, nothing built; default: build-release/, built here in Release).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
smoke="${SMOKE:-0}"
if [[ "$smoke" == 1 ]]; then
  N="${N:-2000}" BENCH_N="${BENCH_N:-2000}" DUE_MS="${DUE_MS:-3000}"
else
  N="${N:-100000}" BENCH_N="${BENCH_N:-200000}" DUE_MS="${DUE_MS:-20000}"
fi
if [[ -n "${BUILD_DIR:-}" ]]; then
  build="$(cd "$BUILD_DIR" && pwd)"
else
  build="$root/build-release"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target broker_bench delayd >/dev/null
fi

started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  ((started)) && scripts/stack.sh down >/dev/null || true
}
trap cleanup EXIT
eval "$(scripts/stack.sh env | sed 's/^/export /')"

"$build/bench/broker_bench" --redis-url "$REDIS_URL" --n "$BENCH_N"

run="bench-$$-$(date +%s)"
export DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL"
export DELAYD_KAFKA_INGEST_TOPIC="$run.ingest" DELAYD_KAFKA_DLQ_TOPIC="$run.dlq"
export DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$run.ready.{business}" DELAYD_KAFKA_GROUP_ID="$run"
export DELAYD_REDIS_PREFIX="$run" DELAYD_KAFKA_CREATE_TOPICS=true DELAYD_LOG_LEVEL=warn
log="$build/$run.log"
"$build/apps/delayd" >"$log" 2>&1 &
pid=$!
# delayd creates the ingest topic; wait for it before publishing.
for _ in $(seq 1 300); do
  kcat -L -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" 2>/dev/null | grep -q "partition 3" && break
  sleep 0.1
done

due=$(($(date +%s%3N) + DUE_MS))
seq -f "payload %08g" 1 "$N" | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -H "deliver-at=$due" -H business=bench -X linger.ms=20
published=$(date +%s%3N)

# The jobs of business "bench" in state $1: the sum of the four shards' counters
# (<prefix>:{<shard>}:stats, storage/key_schema.hpp).
count() {
  local sum=0 v p
  for p in 0 1 2 3; do
    v=$(redis-cli -u "$REDIS_URL" hget "$run:{$run.ingest:$p}:stats" "bench|$1")
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
# Waits until `count $1` is N, for at most 300 s: a broken run fails instead of hanging.
wait_for_count() {
  local deadline=$(($(date +%s) + 300))
  until [[ "$(count "$1")" == "$N" || ( -n "${2:-}" && "$(count "$2")" == "$N" ) ]]; do
    (($(date +%s) < deadline)) || { echo "run-broker: $(count "$1") of $N jobs $1 after 300 s; log: $log" >&2; exit 1; }
    sleep 0.05
  done
}
# Ingest: until every record is a job in Redis.
wait_for_count delay ready
t1=$(date +%s%3N)
awk -v n="$N" -v ms="$((t1 - published + 1))" \
  'BEGIN { printf "{\"bench\":\"pipeline_ingest\",\"n\":%d,\"seconds\":%.3f,\"jobs_per_s\":%.0f}\n", n, ms / 1000, n * 1000 / ms }'
((t1 < due)) || echo "warning: ingest was not finished at the due instant; the figures below mix both" >&2

wait_for_count ready
t2=$(date +%s%3N)
awk -v n="$N" -v ms="$((t2 - due))" \
  'BEGIN { printf "{\"bench\":\"pipeline_fire\",\"n\":%d,\"seconds\":%.3f,\"jobs_per_s\":%.0f,\"last_ready_after_due_ms\":%d}\n", n, ms / 1000, n * 1000 / ms, ms }'
