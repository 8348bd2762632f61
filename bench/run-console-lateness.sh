#!/usr/bin/env bash
# Does browsing the console move delivery lateness? delayd (release build, admin endpoint on) holds
# PENDING far-future jobs of one business; then `e2e_load rate` publishes RATE jobs/s due
# DELAY_MS after publish for ROUND_SECONDS s and measures each one's lateness through the ready topic,
# ROUNDS times without and ROUNDS times with bench/console-browser.py paging GET /jobs at
# BROWSE_RATE pages/s (alternating, so that drift of the machine hits both alike). Prints one JSON
# object per line: e2e_load's lateness figures, tagged "browsing": true|false, and the browser's
# page latencies. Starts the stack if it is not up (and stops it again after).
#   RATE=5000 ROUND_SECONDS=30 ROUNDS=2 BROWSE_RATE=10 bench/run-console-lateness.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
RATE="${RATE:-5000}" SECONDS_PER_ROUND="${ROUND_SECONDS:-30}" ROUNDS="${ROUNDS:-2}" BROWSE_RATE="${BROWSE_RATE:-10}"
DELAY_MS="${DELAY_MS:-2000}" PENDING="${PENDING:-200000}"
build="$root/build-release"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target delayd e2e_load >/dev/null
started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
eval "$(scripts/stack.sh env | sed 's/^/export /')"
run="console-lat-$$"
port=$((20000 + $$ % 20000))
pid="" browser=""
cleanup() {
  [[ -n "$browser" ]] && kill -TERM "$browser" 2>/dev/null || true
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  "$build/bench/e2e_load" cleanup --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --topic-prefix "$run" \
    --groups "$run" --redis-match "$run*" >/dev/null 2>&1 || true
  ((started)) && scripts/stack.sh down >/dev/null || true
}
trap cleanup EXIT
log="$build/$run.log"
env DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL" \
  DELAYD_KAFKA_INGEST_TOPIC="$run.ingest" DELAYD_KAFKA_DLQ_TOPIC="$run.dlq" \
  DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$run.ready.{business}" DELAYD_KAFKA_GROUP_ID="$run" \
  DELAYD_REDIS_PREFIX="$run" DELAYD_KAFKA_CREATE_TOPICS=true DELAYD_LOG_LEVEL=info \
  DELAYD_ADMIN_LISTEN="127.0.0.1:$port" "$build/apps/delayd" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q assigned "$log" && break; sleep 0.1; done
grep -q assigned "$log" || { tail -n 20 "$log" >&2; exit 1; }
args=(--bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --ingest-topic "$run.ingest"
  --ready-topic "$run.ready.bench" --group "$run" --data-dir "$build")
# The jobs to browse: far in the future, so that they never fire during the rounds; published with
# kcat, then waited for in Redis (GET /overview).
far=$(($(date +%s%3N) + 86400000))
seq -f "far %08g" 1 "$PENDING" | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -H "deliver-at=$far" -H business=bench -X linger.ms=20
for _ in $(seq 1 600); do
  pending=$(curl -s "http://127.0.0.1:$port/overview" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("pending", 0))' || echo 0)
  ((pending >= PENDING)) && break
  sleep 0.5
done
echo "{\"figure\":\"pending_to_browse\",\"value\":$pending}"
for round in $(seq 1 "$ROUNDS"); do
  for browsing in false true; do
    if [[ "$browsing" == true ]]; then
      python3 bench/console-browser.py --port "$port" --rate "$BROWSE_RATE" \
        --filter 'state=delay&business=bench' --filter 'state=delay' --filter 'state=ready&business=bench' \
        >"$build/$run.browser" &
      browser=$!
    fi
    "$build/bench/e2e_load" rate "${args[@]}" --tag "r$round$browsing" --rate "$RATE" --seconds "$SECONDS_PER_ROUND" \
      --delay-ms "$DELAY_MS" --figure "lateness_${RATE}_per_s" | sed "s/^{/{\"browsing\":$browsing,\"round\":$round,/"
    if [[ -n "$browser" ]]; then
      kill -TERM "$browser"
      wait "$browser" || true
      browser=""
      sed "s/^{/{\"round\":$round,/" "$build/$run.browser"
    fi
  done
done
